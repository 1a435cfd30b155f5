"""``python -m skts``: the command line."""

import sys

from skts.cli import main

if __name__ == "__main__":
    sys.exit(main())
