"""`python -m reprobridge` runs the `rb` command line."""

from reprobridge.cli import main

if __name__ == "__main__":
    main()
