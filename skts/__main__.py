"""``python -m skts``: the command line."""

from skts.cli._entrypoint import run

if __name__ == "__main__":
    run()
