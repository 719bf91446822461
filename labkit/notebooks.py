"""Command line: ``python -m labkit.notebooks html`` executes every notebook and exports HTML
(:mod:`labkit.lessons.notebook`)."""
from .lessons.notebook import main

if __name__ == "__main__":
    main()
