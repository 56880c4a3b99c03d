import sys

from .cli import main

if __name__ == "__main__":  # not when a spawned worker imports this module as __mp_main__
    sys.exit(main())
