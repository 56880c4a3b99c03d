"""stado's commands that change a job or the queue: cancel, job hold and release, queue pause and resume."""
import time
from runkit.core.clock import SYSTEM
from .common import filtered, open_store, out, print_json, print_outcomes


def cmd_cancel(args) -> int:
    if filtered(args):
        from ..commands import bulk

        ids, outcomes = bulk.cancel(open_store(), args.ids, state=args.state, name=args.name, reason=args.reason,
                                   clock=SYSTEM)
        return print_outcomes(args, ids, outcomes, "not cancelled")
    from .. import jobs

    report = jobs.cancel(open_store(), args.ids[0], reason=args.reason, clock=SYSTEM)
    if args.json:
        print_json({"id": report.job_id, "result": report.kind, "honoured": report.honoured, "message": report.message,
               "state_before": report.view.state})
    else:
        out(report.message)
    return 0 if report.honoured else 1  # 1: it had already ended otherwise; nothing was written


def cmd_hold(args) -> int:
    from ..queue.submission import whoami

    if filtered(args):
        from ..commands import bulk

        held = args.job_command == "hold"
        ids, outcomes = bulk.hold(open_store(), args.ids, state=args.state, name=args.name, held=held, by=whoami(),
                                 clock=SYSTEM)
        return print_outcomes(args, ids, outcomes, "not held" if held else "not released")
    from ..jobs.hold import hold, release

    report = (hold if args.job_command == "hold" else release)(open_store(), args.ids[0], by=whoami(), now=time.time())
    if args.json:
        print_json({"id": report.job_id, "held": report.doc.held, "changed": report.changed, "message": report.message})
    else:
        out(report.message)
    return 0


def cmd_pause(args) -> int:
    from ..queue import pause

    record, already = pause.pause(open_store(), reason=args.reason, now=time.time())
    if args.json:
        print_json({"paused": True, "already": already, "record": record})
    else:
        from ..commands.render import pause_text

        out(f"{pause_text(record, 'queue was already paused' if already else 'queue is now paused')}; submissions are "
             "still accepted")
    return 0


def cmd_resume(args) -> int:
    from ..queue import pause

    record = pause.resume(open_store())
    if args.json:
        print_json({"paused": False, "lifted": record})
    else:
        out("queue resumed; agents claim again" if record else "queue was not paused; nothing changed")
    return 0
