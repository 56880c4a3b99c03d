"""`stado schedule`: add, list, rm, pause and resume."""
import time
from ..core.errors import BadInput
from .common import open_store, out, print_json


def cmd_schedule_add(args) -> int:
    from ..queue import schedules
    from ..commands.batch import submission_from_args
    from ..core.spec import check_name
    from ..queue.submission import stored_spec, whoami

    words = getattr(args, "cmd_words", None)
    if not words:
        raise BadInput('missing command: stado schedule add NAME "CRON" [flags] -- CMD...')
    check_name(args.sched_name)
    schedules.parse_cron(args.cron, args.tz)  # all checked before an upload is stored
    if args.name is None:
        args.name = args.sched_name  # the fired jobs' name
    store = open_store()
    schedules.refuse_taken(store, args.sched_name)
    spec = stored_spec(store, submission_from_args(args, command=" ".join(words))).to_json()
    doc = schedules.add(store, args.sched_name, args.cron, spec, tz=args.tz, by=whoami(), now=time.time())
    if args.json:
        print_json(doc)
    else:
        upcoming = schedules.next_fire(doc, time_now())
        out(f"schedule {doc['name']} added: {doc['cron']} ({doc['tz']}); next fire {_iso(upcoming)}; "
             "fired by any running agent")
    return 0


def cmd_schedule_list(args) -> int:
    from ..queue.schedules import list_schedules

    problems: list[str] = []
    found = list_schedules(open_store(), problems=problems, now=time.time())
    if args.json:
        print_json({"schedules": found, "problems": problems})
        return 0
    if not found and not problems:
        out("no schedules (add one with `stado schedule add NAME \"CRON\" -- CMD`)")
    from runkit.core.printable import printable

    from ..commands.render import shown

    for doc in found:  # one line each: a schedule's words are escaped (a newline in its command shows as \n)
        state = "paused" if doc.get("paused") else f"next {doc.get('next_fire')}"
        out(f"{shown(doc['name'])}  {shown(doc['cron'])} ({shown(doc.get('tz'))})  {state}  fired "
             f"{shown(doc.get('fired', 0))}, skipped {shown(doc.get('skipped', 0))}  {shown(doc['spec'].get('command'))}")
    for problem in problems:
        out(f"problem: {printable(problem)}")
    return 0


def cmd_schedule_change(args) -> int:
    from ..queue import schedules
    from ..queue.submission import whoami

    store = open_store()
    if args.schedule_command == "rm":
        doc, changed = schedules.remove_schedule(store, args.sched_name), True
        message = (f"schedule {args.sched_name} removed; jobs it fired are kept" if doc is not None else
                   f"corrupt schedule document {args.sched_name} removed; jobs it fired are kept")
    else:
        doc, changed = schedules.set_paused(store, args.sched_name, args.schedule_command == "pause", by=whoami(), now=time.time())
        verb = "paused" if args.schedule_command == "pause" else "resumed"
        message = f"schedule {args.sched_name} {verb}" if changed else f"schedule {args.sched_name} was already {verb}"
    print_json({"schedule": doc, "changed": changed}) if args.json else out(message)
    return 0


def time_now() -> float:
    return time.time()


def _iso(t: float) -> str:
    from ..core.documents import iso

    return iso(t)
