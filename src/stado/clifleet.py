"""stado's fleet commands: the queue's pause, agents, the reaper, schedules, repair and doctor (the
parser, the job commands and the fast submit path are in cli.py)."""
import sys

from .cli import _json, _out, _store
from .errors import BadInput


def cmd_pause(args) -> int:
    from . import pause

    record, already = pause.pause(_store(), reason=args.reason)
    if args.json:
        _json({"paused": True, "already": already, "record": record})
    else:
        from .render import pause_text

        _out(f"{pause_text(record, 'queue was already paused' if already else 'queue is now paused')}; submissions are "
             "still accepted")
    return 0


def cmd_resume(args) -> int:
    from . import pause

    record = pause.resume(_store())
    if args.json:
        _json({"paused": False, "lifted": record})
    else:
        _out("queue resumed; agents claim again" if record else "queue was not paused; nothing changed")
    return 0


def cmd_agent(args) -> int:
    from .agentcli import cmd_agent as run

    return run(args, _store)


def cmd_schedule_add(args) -> int:
    from . import schedules
    from .batch import submission_from_args
    from .spec import check_name
    from .submission import stored_spec, whoami

    words = getattr(args, "cmd_words", None)
    if not words:
        raise BadInput('missing command: stado schedule add NAME "CRON" [flags] -- CMD...')
    check_name(args.sched_name)
    schedules.parse_cron(args.cron, args.tz)  # all checked before an upload is stored
    if args.name is None:
        args.name = args.sched_name  # the fired jobs' name
    store = _store()
    schedules.refuse_taken(store, args.sched_name)
    spec = stored_spec(store, submission_from_args(args, command=" ".join(words))).to_json()
    doc = schedules.add(store, args.sched_name, args.cron, spec, tz=args.tz, by=whoami())
    if args.json:
        _json(doc)
    else:
        upcoming = schedules.next_fire(doc, time_now())
        _out(f"schedule {doc['name']} added: {doc['cron']} ({doc['tz']}); next fire {_iso(upcoming)}; "
             "fired by any running agent")
    return 0


def cmd_schedule_list(args) -> int:
    from .schedules import list_schedules

    problems: list[str] = []
    found = list_schedules(_store(), problems=problems)
    if args.json:
        _json({"schedules": found, "problems": problems})
        return 0
    if not found and not problems:
        _out("no schedules (add one with `stado schedule add NAME \"CRON\" -- CMD`)")
    from runkit.printable import printable

    from .render import shown

    for doc in found:  # one line each: a schedule's words are escaped (a newline in its command shows as \n)
        state = "paused" if doc.get("paused") else f"next {doc.get('next_fire')}"
        _out(f"{shown(doc['name'])}  {shown(doc['cron'])} ({shown(doc.get('tz'))})  {state}  fired "
             f"{shown(doc.get('fired', 0))}, skipped {shown(doc.get('skipped', 0))}  {shown(doc['spec'].get('command'))}")
    for problem in problems:
        _out(f"problem: {printable(problem)}")
    return 0


def cmd_schedule_change(args) -> int:
    from . import schedules
    from .submission import whoami

    store = _store()
    if args.schedule_command == "rm":
        doc, changed = schedules.remove_schedule(store, args.sched_name), True
        message = (f"schedule {args.sched_name} removed; jobs it fired are kept" if doc is not None else
                   f"corrupt schedule document {args.sched_name} removed; jobs it fired are kept")
    else:
        doc, changed = schedules.set_paused(store, args.sched_name, args.schedule_command == "pause", by=whoami())
        verb = "paused" if args.schedule_command == "pause" else "resumed"
        message = f"schedule {args.sched_name} {verb}" if changed else f"schedule {args.sched_name} was already {verb}"
    _json({"schedule": doc, "changed": changed}) if args.json else _out(message)
    return 0


def time_now() -> float:
    import time

    return time.time()


def _iso(t: float) -> str:
    from .documents import iso

    return iso(t)


def cmd_reap(args) -> int:
    from .reaper import Watch, reap
    from .submission import whoami

    if not args.watch and (args.passes is not None or args.every is not None):
        raise BadInput("--every and --passes go with --watch (a one-shot pass takes neither)")
    every = 30.0 if args.every is None else args.every
    if every <= 0 or (args.passes is not None and args.passes < 1):
        raise BadInput("--every takes seconds above 0 and --passes a count of 1 or more")
    store, writer = _store(), f"reaper {whoami()}"
    clock = _store_clock(store)
    if not args.watch:
        _print_reap(reap(store, writer=writer, margin=args.margin, clock=clock), args.json)
        return 0
    import signal
    import time

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop between passes as Ctrl-C does
    watch, done = Watch(), 0
    try:
        while True:
            if clock.due():
                clock = _store_clock(store)
            _print_reap(reap(store, writer=writer, margin=args.margin, watch=watch, clock=clock), args.json)
            done += 1
            if args.passes is not None and done >= args.passes:
                return 0
            time.sleep(every)
    except KeyboardInterrupt:
        return 0


def cmd_may_delete(args) -> int:
    """The rule: a VM is not deleted while any job on it is alive by the reaper's verdict."""
    from .reaper import alive_on

    ref = args.instance_ref
    if not ref.strip() or not ref.isprintable():
        raise BadInput(f"bad instance ref {ref!r}: give it as jobs record it, e.g. local@HOST (see `stado status`)")
    store = _store()
    alive = alive_on(store, ref, margin=args.margin, clock=_store_clock(store))
    if args.json:
        _json({"instance_ref": ref, "may_delete": not alive, "alive": [{"id": job_id, "by": why} for job_id, why in alive]})
    elif not alive:
        _out(f"{ref} may be deleted: no job is alive on it")
    else:
        _out(f"{ref} must not be deleted: {len(alive)} job(s) alive on it")
        for job_id, why in alive:
            _out(f"  {job_id}  " + ("its running record is corrupt: cannot tell where it runs" if why == "corrupt"
                                    else f"alive by its {why}" if why != "unpromised" else "unpromised (kept)"))
    return 0 if not alive else 1


def _store_clock(store):
    """The store's clock, measured with a scratch object of this command's own (promises are judged by it, never
    by this host's clock)."""
    import os

    from .storeclock import measured

    return measured(store, f"control/clock/{os.urandom(8).hex()}")


def _print_reap(summary, as_json: bool) -> None:
    lines = summary.lines + [problem.text for problem in summary.problems]
    if as_json:
        _json(dict(summary.as_json(), lines=lines))
    else:
        for line in lines:
            _out(line)
        _out(summary.line())
    sys.stdout.flush()


def cmd_repair(args) -> int:
    from .repair import repair
    from .submission import whoami

    lines = repair(_store(), args.id, by=whoami())
    _json({"actions": lines}) if args.json else _out("\n".join(lines))
    return 0


def cmd_doctor(args) -> int:
    from .doctor import doctor

    report = doctor(_store())
    if args.json:
        _json(report)
    else:
        _out(f"store {report['store']}")
        for check in report["checks"]:
            _out(f"  {check['verdict']:<8} {check['check']:<19} {check['detail']}")
    return 0 if report["ok"] else 4


def cmd_ui(args) -> int:
    from runkit.web.server import LaunchError, run

    store = _store()

    def make_app(launch):
        from .ui.app import create

        return create(launch, store)

    try:
        return run("stado", args.host, args.port, make_app)
    except LaunchError as e:
        raise BadInput(str(e)) from None
