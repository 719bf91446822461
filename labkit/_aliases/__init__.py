"""The old command forms ``python -m labkit.<name>``, one module each, kept because model cards and committed results
record them (``data/models/*/MODEL_CARD.md``, ``data/playground/*.json``, the measurements of ``docs/decisions.md``);
forms recorded nowhere were removed.

``labkit/__init__.py`` adds this folder to ``labkit.__path__``, so ``labkit/_aliases/bench.py`` is the module
``labkit.bench``; each one only calls :func:`labkit.cli.alias`. (This ``__init__.py`` is here so that setuptools
ships the folder; nothing imports ``labkit._aliases``.)
"""
