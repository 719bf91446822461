"""``python -m labkit <command> [args]``: the lab's command line (the command table is :mod:`labkit.cli`)."""
import sys

from labkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
