# The lab's two entry points (see README):
#   make lab    set up .venv if missing, then open JupyterLab on the notebooks (127.0.0.1, token auth on)
#   make test   set up .venv if missing, then run the whole test suite (notebooks included)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test venv html bench clean-build

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0       # first, pinned: an unpinned torch pulls GBs of CUDA wheels
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --notebook-dir=notebooks

test: $(STAMP)
	$(PY) -m pytest

html: $(STAMP)
	$(PY) -m labkit.notebooks html

bench: $(STAMP)
	$(PY) -m labkit.bench

clean-build:
	rm -rf build
