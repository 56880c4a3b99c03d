"""stado's submitting commands: submit and job rerun."""
from runkit.core.clock import SYSTEM
import sys

from ..core.errors import BadInput
from .common import PROG, filtered, open_store, out, print_json, print_outcomes


def cmd_submit(args) -> int:
    from ..queue import submission
    from ..commands.batch import read_batch, submission_from_args

    if args.batch is not None:
        if args.cmd is not None:
            raise BadInput("give either a command or --batch FILE, not both")
        items = read_batch(args.batch, defaults=submission_from_args(args, command="true"))
    else:
        if args.cmd is None:
            raise BadInput("missing command: stado submit \"CMD\" (or --batch FILE)")
        items = [submission_from_args(args, command=args.cmd)]
    done = submission.queue_jobs(open_store(), items, clock=SYSTEM)
    # Every job that may exist is printed, the one whose queueing could not be told too (stderr says which), so
    # that a script holds an id for each; the error that stopped a batch comes last, on stderr, with its code.
    shown = done.docs + ([done.unknown] if done.unknown is not None else [])
    if args.json:
        existing = set(done.existing)
        print_json({"jobs": [{"id": doc.id, "name": doc.spec.name, "queued": True if doc is not done.unknown else None,
                         "existing": doc.id in existing, "indexed": doc.id not in done.unindexed} for doc in shown]})
    else:
        for doc in shown:
            out(doc.id)
    for job_id, said in done.unindexed.items():
        sys.stderr.write(f"{PROG}: job {job_id} is queued, but its entry in the claim-order index could not be "
                         f"written ({said}): agents find it on their slow pass, at their start and every 5 minutes\n")
    if done.stopped is not None:
        raise done.stopped
    return 0


def cmd_rerun(args) -> int:
    from ..queue import submission
    from ..core.errors import OutcomeUnknown

    if filtered(args):
        from ..commands import bulk

        if args.key is not None:
            raise BadInput("--key names one rerun: give one job with it, or rerun several without --key")
        ids, outcomes = bulk.rerun(open_store(), args.ids, state=args.state, name=args.name,
                                   fresh_inputs=args.fresh_inputs, beside=args.beside, clock=SYSTEM)
        return print_outcomes(args, ids, outcomes, "not rerun")
    try:
        original, new = submission.rerun(open_store(), args.ids[0], fresh_inputs=args.fresh_inputs, beside=args.beside,
                                         key=args.key, clock=SYSTEM)
    except OutcomeUnknown as unknown:
        out(str(unknown.job_id))  # as a submit does: the id of the job that may be queued
        raise
    if args.json:
        print_json({"id": new.id, "rerun_of": original.id, "name": new.spec.name,
               "rerun_inputs": new.rerun_inputs, "inputs": new.spec.inputs})
    else:
        out(new.id)
    return 0
