"""Text and JSON views of what the library returns (no store access here).

Text views show other people's text (names, commands, reasons, hosts, capabilities) through runkit.core.printable:
escaped, so it never reaches a terminal as control and every table keeps one line per job. JSON is as stored."""
from runkit.core.printable import printable

from ..core import keys
from ..core.admission import offer_of, size_text
from ..core.documents import RUNNING_PHASE, status_json
from .overview import Overview

STATE_ORDER = ("running", "queued") + keys.TERMINAL_STATES


def _result(data: dict) -> str:
    if data.get("outcome") is None:
        return "-" if data.get("phase") in (None, RUNNING_PHASE) else data["phase"]
    text = data["outcome"]
    if not data.get("terminal"):
        return f"{text} ({data['phase']})"  # decided, but its processes are still being stopped
    error = (data.get("error") or {}).get("class")
    if error not in (None, "exit_code", "signal", "timeout"):
        text += f" ({error})"
    elif data.get("exit_code") is not None:
        text += f" ({data['exit_code']})"
    elif data.get("signal"):
        text += f" (signal {data['signal']})"
    return text


def _state(row: dict, passed: float | None) -> str:
    text = row["state"] + ("" if row["phase"] in (None, RUNNING_PHASE) else f"/{row['phase']}")
    text += "/held" if row.get("held") else ""
    return text if passed is None else f"{text}, promise passed {passed:.0f} s ago"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def overview_json(ov: Overview) -> dict:
    return {"paused": ov.paused, "counts": ov.counts, "corrupt": ov.corrupt, "hidden_finished": ov.hidden,
            "jobs": [dict(status_json(v), unschedulable=ov.unschedulable.get(v.id), waiting=ov.waiting.get(v.id),
                          promise_passed_seconds=_rounded(ov.promise_passed.get(v.id))) for v in ov.jobs],
            "problems": ov.problems, "agents": ov.agents, "stale_agents": ov.stale_agents,
            "gone_agents": ov.gone_agents, "agents_window_seconds": ov.agents_window,
            "no_live_agent": ov.no_agent, "selected": ov.selected, "matched": ov.matched if ov.selected else None}


WAITING_SHOWN = 3  # jobs named per waiting reason; the rest are counted


def overview_table(ov: Overview) -> str:
    if ov.selected and not ov.jobs:
        return f"no job matches {ov.selected}"
    lines = _jobs_table(ov)
    lines += _agent_lines(ov)
    if ov.no_agent:
        from ..core.admission import NO_AGENT

        lines.append(f"{ov.counts.get('queued', 0)} queued job(s) wait: {NO_AGENT}")
    labels = job_labels([status_json(v) for v in ov.jobs if v.id in ov.unschedulable or v.id in ov.waiting])
    for title, notes, words in (("unschedulable", ov.unschedulable, "no live agent can run {it}"),
                                ("waiting", ov.waiting, None)):
        by_reason: dict[str, list[str]] = {}
        for job_id, reason in sorted(notes.items()):
            by_reason.setdefault(reason, []).append(job_id)
        # One line per reason, most jobs first: a job alone by its id, several counted and the first few named.
        for reason, ids in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
            it = "it" if len(ids) == 1 else "them"
            why = f"{words.format(it=it)} ({printable(reason)})" if words else printable(reason)
            if len(ids) == 1:
                lines.append(f"{title}: {ids[0]}: {why}")
                continue
            named = ", ".join(labels[i] for i in ids[:WAITING_SHOWN]) + (
                f" and {len(ids) - WAITING_SHOWN} more" if len(ids) > WAITING_SHOWN else "")
            lines.append(f"{title}: {len(ids)} jobs: {why}: {named}")
    for problem in ov.problems:
        lines.append(f"problem: {printable(problem)}")
    return "\n".join(lines)


def _agent_lines(ov: Overview) -> list[str]:
    """Live agents, then stale ones (silent past their liveness window), each with its short id and when it was last
    seen; those gone longer than the agents window are counted (listed with --all-agents)."""
    from ..queue.selection import short_ids

    every = ov.agents + ov.stale_agents + ov.gone_agents
    short = short_ids([str(a.get("agent")) for a in every if a.get("agent")])

    def named(a: dict) -> str:  # a record that names no agent id: `stado agent forget` takes its key's
        return f"; agent {printable(short[str(a['agent'])])}" if a.get("agent") else ""

    lines = []
    if ov.agents:
        lines.append(f"{len(ov.agents)} agent(s):")
        lines += [f"  {shown(a.get('instance_ref'))} [{_busy(a)}/{shown(a.get('slots'))} slots busy] {offer_text(a)}; "
                  f"{_seen(a)}{named(a)}" for a in ov.agents]
    listed = ov.stale_agents + (ov.gone_agents if ov.show_gone else [])
    if listed:
        lines.append(f"{len(listed)} stale agent(s), silent longer than their liveness window (dead, or cut off from "
                     "the store; not counted as live; `stado agent forget ID` removes a record):")
        lines += [f"  {shown(a.get('instance_ref'))} last seen {shown(a.get('last_seen'))}{_ago(a.get('silent_for'))}"
                  f"{named(a)}" for a in listed]
    if ov.gone_agents and not ov.show_gone:
        lines.append(f"{len(ov.gone_agents)} agent(s) silent longer than {_span(ov.agents_window)} not shown "
                     "(--all-agents)")
    return lines


def _busy(record: dict) -> str:
    """Slots busy: counted from the running records (overview's running_now), else as the record says."""
    if "running_now" in record:
        return shown(record["running_now"])
    running = record.get("running")
    return str(len(running)) if isinstance(running, list) else "?"


def _ago(seconds) -> str:
    return f" ({_span(seconds)} ago)" if isinstance(seconds, (int, float)) else ""


def _span(seconds) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _jobs_table(ov: Overview) -> list[str]:
    lines = []
    if ov.paused:
        lines.append(f"{pause_text(ov.paused, 'queue PAUSED')} (agents do not claim)")
    rows = [status_json(v) for v in ov.jobs]
    rows.sort(key=lambda r: (STATE_ORDER.index(r["state"]), r["id"]))
    header = ("ID", "STATE", "NAME", "RESULT", "WHERE", "SUBMITTED", "COMMAND")
    table = [header] + [(r["id"], _state(r, ov.promise_passed.get(r["id"])), _name(r), _result(r),
                         shown(r["instance_ref"]), shown(r["submitted_at"])[:19], _short(r["command"])) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    for row in table:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    counts = ", ".join(f"{ov.counts.get(s, 0)} {s}" for s in STATE_ORDER)
    if ov.corrupt:
        counts += f", {ov.corrupt} corrupt (see problems)"
    lines.append(counts + (f" ({ov.hidden} older finished jobs not shown: --all)" if ov.hidden and not ov.selected
                           else ""))
    if ov.selected:
        lines.append(f"{ov.matched} job(s) shown: those that match {ov.selected}")
    return lines


def job_labels(jobs: list[dict]) -> dict[str, str]:
    """id -> 'name (short id)' (or the short id alone) of each job's status_json, escaped: short ids are the
    shortest prefixes that tell these jobs apart (one finds its job while no other job shares it)."""
    from ..queue.selection import job_label, short_ids

    short = short_ids([job["id"] for job in jobs])
    return {job["id"]: printable(job_label(job, short[job["id"]])) for job in jobs}


def _seen(record: dict) -> str:
    ago = record.get("seen_ago")
    return f"seen {ago:.0f} s ago" if isinstance(ago, (int, float)) else f"seen {shown(record.get('last_seen'))}"


def _name(row: dict) -> str:
    """The job's display name, escaped; a job a schedule fired is named by its schedule."""
    schedule = row.get("schedule")
    if not row["name"] and isinstance(schedule, dict) and schedule.get("name"):
        return f"{printable(str(schedule['name']))} (schedule)"
    return shown(row["name"])


def shown(value) -> str:
    """A cell of other people's text: escaped (runkit.core.printable), '-' when there is none."""
    return "-" if value in (None, "") else printable(str(value))


def pause_text(record: dict, what: str) -> str:
    """'<what> by WHO at WHEN: WHY', the pause record's own words escaped."""
    why = f": {printable(str(record.get('reason')))}" if record.get("reason") else ""
    return f"{what} by {shown(record.get('by'))} at {shown(record.get('at'))}{why}"


def offer_text(record: dict) -> str:
    """What an agent's record says it offers, in a few words."""
    offer = offer_of(record)
    if offer is None:
        return "offer unreadable"
    words = [f"{offer.cores} cores"] + ([size_text(offer.memory)] if offer.memory else [])
    if offer.accelerators:
        words.append(f"{offer.accelerators} accelerators ({printable(','.join(offer.devices))})" if offer.devices
                     else f"{offer.accelerators} accelerators")
    if offer.capabilities:
        words.append("capabilities " + printable(",".join(sorted(offer.capabilities))))
    words.append(f"provider {printable(str(offer.provider))}" + (" (spot)" if offer.spot else ""))
    if offer.price_per_hour is not None:
        words.append(f"${offer.price_per_hour:g}/hour")
    return ", ".join(words)


def job_details(data: dict) -> str:
    order = ("id", "name", "schedule", "state", "phase", "terminal", "outcome", "exit_code", "signal", "error",
             "dependency", "command",
             "submitted_at", "claimed_at", "started_at", "finished_at", "lease_expires_at", "instance_ref", "owner",
             "requeues", "failures", "handbacks", "retry_at", "waiting", "cost_usd", "rerun_of", "rerun_inputs",
             "cancelled_by", "cancel_reason", "env",
             "moving", "held")
    lines = []
    for key in order:
        value = data.get(key)
        if value in (None, [], "") and key not in ("terminal", "state"):
            continue
        if key == "error" and isinstance(value, dict):
            value = f"{value['class']}: {value['message']}"
        if key == "schedule" and isinstance(value, dict):
            value = f"{value.get('name')} (fired for {value.get('fire_time')})"
        if key == "env" and isinstance(value, dict):
            value = " ".join(f"{name}={text}" for name, text in sorted(value.items()))
        if key == "dependency" and isinstance(value, dict):
            value = f"{value.get('job')} ({value.get('condition')}) ended {value.get('state')}"
        if key == "held" and isinstance(value, dict):
            value = f"by {value.get('by')} at {value.get('at')} (`stado job release {data.get('id')}` lets it run)"
        lines.append(f"{key + ':':<18}{printable(str(value))}")
    return "\n".join(lines)


def _short(command: str | None, width: int = 60) -> str:
    text = printable((command or "").strip())  # one line: a newline shows as \n
    return text if len(text) <= width else text[:width - 3] + "..."
