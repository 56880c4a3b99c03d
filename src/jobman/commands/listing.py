"""`jobman list`: reading the jobs in one consistent snapshot, and the table that fits a terminal.

What a row says about the queue ("3 ahead in line") is computed when the list is read, from the same
snapshot as the rows themselves (one read transaction), so every row agrees with every other one.
"""
import os
import time

from runkit.core.durations import format_duration

from ..store import groups, queries
from runkit.core.printable import printable

from .render import command_text, state_text, why_text

NAME_WIDTH = 20  # a longer name is cut in the table (show and --json give it whole)
ELLIPSIS = "…"
COLOURS = {"succeeded": "32", "failed": "31", "timed_out": "31", "submission_failed": "31", "lost": "35",
           "dependency_failed": "33", "cancelled": "33", "running": "36", "held": "33"}


def read(conn, *, active_only: bool, limit: int | None, finished: int | None, waiting: int | None, where,
         count_rest: bool) -> dict:
    """{"jobs": views newest first, "not_shown": {"waiting": n, "finished": n} matching but left out}, from
    one snapshot."""
    from ..core.model import Job

    conn.execute("BEGIN")  # deferred: a read snapshot (WAL), never a lock on writers
    try:
        rows = [Job.from_row(row) for row in queries.list_jobs(conn, limit=limit, active_only=active_only,
                                                                 finished=finished, waiting=waiting, where=where)]
        not_shown = {"waiting": 0, "finished": 0}
        if count_rest:
            all_waiting, all_finished = queries.count_waiting_and_finished(conn, where)
            not_shown = {"waiting": all_waiting - sum(1 for r in rows if r.phase == "waiting"),
                         "finished": all_finished - sum(1 for r in rows if r.finished)}
        views = annotate(conn, rows)
        lost = lost_note(conn)
    finally:
        conn.execute("COMMIT")
    return {"jobs": views, "not_shown": not_shown, **({"lost_note": lost} if lost else {})}


def lost_note(conn) -> str | None:
    """One line on the lost jobs nobody has restarted (a reboot makes every waiting job of a sweep lost once its
    lease runs out): what happened, and the command that brings the work back. None if there are none."""
    from runkit.system import proc

    before, started, earlier_boot = queries.lost_not_restarted(conn, proc.boot_id())
    if not before + started:
        return None
    what = (f"{before + started} job(s) were lost when the machine restarted (their supervisors ran before this boot)"
            if earlier_boot == before + started else f"{before + started} job(s) were lost (their supervisors died"
            + (", some before this boot)" if earlier_boot else ")"))
    if before:
        also = f" (--include-started: also the {started} that had started, which may have done part of their work)" \
            if started else ""
        return (f"{what}, {before} of them before they started: `jobman restart --state lost` submits those again, "
                f"their dependencies kept{also}")
    return (f"{what}, each after it had started (it may have done part of its work): `jobman restart --state lost "
            f"--include-started` submits them again, their dependencies kept")


def annotate(conn, rows) -> list[dict]:
    """The views of model.Job records, each waiting or lost one saying why: its place in its group's line, what
    is left of a lost one (read inside the caller's snapshot, so every row agrees with the others)."""
    from .api import job_view

    lines, reasons, views = {}, {}, []
    for row in rows:
        view = job_view(row)
        if row.outcome == "lost":
            view["wait_detail"] = lost_text(row)
        elif row.phase == "running":
            mark_stopped(conn, view)
        elif row.waiting_for == "slot":
            group = row.group_name
            if group not in lines:
                lines[group] = {job: n for n, job in enumerate(queries.line(conn, group))}
                reasons[group] = slot_reason(conn, group)
            view["wait_detail"] = reasons[group]
            ahead = lines[group].get(view["id"])
            if ahead is not None:
                place = "next in line" if ahead == 0 else f"{ahead} ahead in line"
                view["wait_detail"] = f"{view['wait_detail']}; {place}"
        views.append(view)
    return views


def slot_reason(conn, group: str) -> str:
    """Why a job waits for a slot, as its group is now: a waiter records its reason when it looks, and one not
    rung since its group's limit changed (only as many of the line as slots were freed are rung) would still
    say "paused" of a group that has been opened."""
    limit = queries.slot_limit(conn, group) or 0
    held = queries.slots_held(conn, group)
    if groups.is_paused(conn, group):
        return f"group {group} is paused (jobman group resume {group})"
    if limit == 0:
        return f"group {group} is paused (limit 0)"
    if held >= limit:
        return f"group {group} is full (limit {limit})"
    return f"group {group} has {limit - held} free slot(s) (limit {limit}, {held} running)"


def mark_stopped(conn, view: dict) -> None:
    """A running job whose target is stopped (SIGSTOP, `jobman signal JOB STOP`, a debugger) is shown as
    `stopped`: its state says so, its phase stays running (it holds its slot, and its timeout runs on)."""
    from runkit.system import proc

    attempt = queries.last_attempt(conn, view["id"])
    if attempt is None or attempt["ended_at"] is not None or attempt["pid"] is None:
        return
    found = proc.stat(attempt["pid"])
    if (found is None or found.state not in ("T", "t") or found.start_time != attempt["start_time"]
            or attempt["boot_id"] != proc.boot_id()):
        return
    view["state"] = "stopped"
    view["stopped"] = True
    view["wait_detail"] = "stopped by a signal: `jobman signal JOB CONT` lets it go on"


def lost_text(row) -> str:
    """What is left of a lost job, as its record says now (reconciliation frees the slot once the tree is gone)."""
    if row.slot_held:
        return "its supervisor is gone; its target tree is still alive: it keeps its slot in group " + row.group_name
    if row.attempts:
        return "its supervisor is gone, and its target process tree is gone too"
    return NEVER_STARTED


NEVER_STARTED = "its supervisor is gone; no target was started"


# --- the table ------------------------------------------------------------------------------------

def terminal_width(stream, environ=os.environ) -> int | None:
    """COLUMNS if set, else the terminal's width when writing to one; None (no limit) into a pipe or file."""
    text = environ.get("COLUMNS", "")
    if text.isdigit() and int(text) > 0:
        return int(text)
    if not stream.isatty():
        return None
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except OSError:
        return None
    return columns if columns > 0 else None  # a terminal that does not know its size


def use_colour(stream, environ=os.environ) -> bool:
    """Colour on a terminal only, never with NO_COLOR set (no-color.org) or TERM=dumb."""
    return stream.isatty() and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"


def _clock(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    fmt = "%H:%M:%S" if time.localtime(ts)[:3] == time.localtime(now)[:3] else "%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(ts))


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    return text[:max(width - 1, 0)] + ELLIPSIS if width > 0 else ""


def _state_word(view: dict) -> str:
    if view.get("held") and view["phase"] != "finished":
        return "held"
    return state_text(view)


def job_table(views: list[dict], width: int | None = None, colour: bool = False, *, now: float) -> str:
    """One line per job, never wider than `width`: the command (then why the job waits) is what gets cut."""
    tries = any((v["attempts"] or 0) > 1 for v in views)
    groups = any(v["group"] != "default" for v in views)
    headers = ["#", "NAME", "STATE"] + (["TRIES"] if tries else []) + (["GROUP"] if groups else []) + \
              ["STARTED", "TIME"]
    rows = []
    for v in views:
        started = v.get("started_at")
        took = None if started is None else (v["finished_at"] or now) - started
        cells = [str(v.get("handle") or "-"), _cut(printable(v["name"] or "-"), NAME_WIDTH), _state_word(v)]
        cells += [str(v["attempts"])] if tries else []
        cells += [v["group"]] if groups else []
        cells += [_clock(started, now), format_duration(took) if took is not None else "-"]
        rows.append((cells, command_text(v["command"]), printable(why_text(v, now)), v))
    widths = [max(len(h), *(len(r[0][i]) for r in rows)) for i, h in enumerate(headers)]
    out = [_line(headers, widths, "COMMAND", "", width, None)]
    for cells, command, why, view in rows:
        out.append(_line(cells, widths, command, why, width, _colour_of(view) if colour else None))
    return "\n".join(out)


def _colour_of(view: dict) -> str | None:
    return COLOURS.get(_state_word(view) if view["phase"] != "finished" else view["outcome"])


def _line(cells: list[str], widths: list[int], command: str, why: str, width: int | None, colour: str | None) -> str:
    fixed = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(cells)) + "  "
    suffix = f"   [{why}]" if why else ""
    if width is not None:
        room = width - len(fixed)
        if len(command) + len(suffix) > room:
            command = _cut(command, max(room - len(suffix), min(room, 12)))
        line = _cut(fixed + command + suffix, width).rstrip()
    else:
        line = (fixed + command + suffix).rstrip()
    start, state = sum(widths[:2]) + 4, cells[2]  # the STATE cell follows # and NAME
    if colour and len(line) >= start + len(state):  # never colour a cell that was cut
        line = f"{line[:start]}\033[{colour}m{state}\033[0m{line[start + len(state):]}"
    return line
