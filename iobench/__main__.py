"""`python -m iobench` runs the CLI, for environments without the console script."""

from iobench.cli import main

if __name__ == "__main__":
    main()
