"""`python -m lamina` runs the command line."""

from .entry import main

main()
