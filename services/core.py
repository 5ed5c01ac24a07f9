"""Entry point: the core service (same as `ykbus core ...`)."""

import sys

from ykbus.cli import main

if __name__ == "__main__":
    sys.exit(main(["core", *sys.argv[1:]]))
