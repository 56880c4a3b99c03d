import sys

if len(sys.argv) > 1 and sys.argv[1] == "__supervise":
    # The supervisor's start-up path: import only what it uses.
    from jobman.supervisor import main as supervise

    sys.exit(supervise(sys.argv[2:]))

from jobman.cli import main

sys.exit(main())
