"""`python -m lamina` runs the command line."""

from .cli import main

main()
