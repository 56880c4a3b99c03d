"""stado command line (placeholder until the fleet queue lands)."""
import sys

USAGE = """usage: stado COMMAND [ARGS]

Run jobs across a fleet through an object store.
Commands arrive with the fleet-queue work: submit, status, job watch, job rerun,
results, cancel, queue pause|resume, machine status, agent.
"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    sys.stderr.write(USAGE)
    return 2
