"""Entry point: the TYJob controller, an RM (same as `ykbus tyjob controller ...`)."""

import sys

from ykbus.tyjob.cli import main

if __name__ == "__main__":
    sys.exit(main(["controller", *sys.argv[1:]]))
