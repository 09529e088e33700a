"""``python -m emberlab sweep SPEC ...``: the driver behind ``ember sweep``."""

import sys

from .ray_sweep import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if not args or args[0] != "sweep":
        print("usage: python -m emberlab sweep SPEC [--out DIR] [--ray-address ADDR] "
              "[--num-cpus N] [--no-resume] [--quiet]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
