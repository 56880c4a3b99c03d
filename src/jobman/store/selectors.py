"""Turning what the user typed (JOB) into a canonical job id.

A handle (the job's short number, digits with no leading zero); `last`, the newest job of the home (as
tsp -d depends on the last job); else an exact id; else an exact display name (the newest job with it);
else a unique id prefix of at least 6 characters (hyphens optional). Anything else is an error that lists
the candidates. Names made only of digits, and the name `last`, are refused at submission, so a handle or
`last` and a name never collide; a UUIDv7 prefix of digits begins with 0.
"""
from runkit.core.ids import hyphenated, is_uuid

from ..core.errors import NotFound
from . import queries

MIN_PREFIX = 6
LAST = "last"


def resolve(conn, text: str) -> str:
    selector = text.strip()
    try:
        selector.encode()
    except UnicodeEncodeError:
        raise NotFound(f"job selector {text!r} is not valid UTF-8: give a job id, a display name or an id "
                       f"prefix") from None
    if not selector:
        raise NotFound("empty job selector: give a job id, a display name or an id prefix of at least 6 characters")
    if is_handle(selector):
        found = queries.id_with_handle(conn, int(selector))
        if found:
            return found
    if selector == LAST:
        newest = queries.newest_job(conn)
        if newest is None:
            raise NotFound("`last` names the newest job, and no job has been submitted yet")
        return newest
    lowered = selector.lower()
    if is_uuid(lowered):
        if queries.job_exists(conn, lowered):
            return lowered
    named = queries.newest_named(conn, selector)
    if named:
        return named
    compact = lowered.replace("-", "")
    if len(compact) >= MIN_PREFIX and all(c in "0123456789abcdef" for c in compact):
        rows = queries.ids_with_prefix(conn, hyphenated(compact), 6)
        if len(rows) == 1:
            return rows[0][0]
        if len(rows) > 1:
            shown = ", ".join(f"{r[0]} (handle {r[2]}{', ' + r[1] if r[1] else ''})" for r in rows[:5])
            more = " ..." if len(rows) > 5 else ""
            raise NotFound(f"job selector {selector!r} is ambiguous: it matches {shown}{more}; give more characters "
                           f"or the handle")
    if is_handle(selector):
        raise NotFound(f"no job has handle {selector} (pruned, or not submitted yet): see jobman list")
    elif len(compact) < MIN_PREFIX and all(c in "0123456789abcdef-" for c in lowered):
        raise NotFound(f"no job named {selector!r}, and an id prefix needs at least {MIN_PREFIX} characters")
    raise NotFound(f"no job matches {selector!r}: give a job id, a display name or an id prefix "
                   f"(see jobman list)")


def is_handle(text: str) -> bool:
    """Whether text has the form of a handle: ASCII digits, no leading zero, at most 18 of them."""
    return 0 < len(text) <= 18 and text.isascii() and text.isdigit() and text[0] != "0"


class Selection:
    """What a command acting on jobs was asked to take beside the JOBs named: every job (`everything`, --all), or
    those in any of `states` (list's state words), of `group`, whose name matches `name` (a glob); the three
    narrow each other. One meaning for every command; each command then takes, of the jobs it matches, only those
    it can act on (choose's `among`)."""

    __slots__ = ("states", "group", "name", "everything")

    def __init__(self, states=(), group: str | None = None, name: str | None = None, everything: bool = False):
        self.states, self.group, self.name, self.everything = tuple(states), group, name, everything

    def __bool__(self) -> bool:
        return bool(self.everything or self.states or self.group is not None or self.name is not None)

    def words(self) -> str:
        """The selection as it was typed (for a message)."""
        out = (["--all"] if self.everything else []) + [f"--state {','.join(self.states)}"] * bool(self.states)
        out += [f"--group {self.group}"] * (self.group is not None) + [f"--name {self.name!r}"] * (self.name is not None)
        return " ".join(out)


def choose(conn, named: list[str], selection: Selection | None, among: tuple[str, str] = ("1", "job")) -> list[str]:
    """The jobs a command acts on: the JOBs named (resolved, in argument order), then the jobs the selection
    matches that the command can act on (among: an SQL condition over job_state s and jobs j, and what such a job
    is called), in submission order, each once. A selection that takes no job, with no JOB named, is NotFound."""
    ids = list(dict.fromkeys(resolve(conn, s) for s in named))
    if not selection:
        return ids
    if selection.group is not None and not queries.group_exists(conn, selection.group):
        raise NotFound(f"no group {selection.group!r}: see jobman group list")
    cond, args = queries.list_filter(selection.states, selection.group, selection.name)
    taken = [r[0] for r in conn.execute(f"SELECT j.id FROM jobs j JOIN job_state s ON s.job_id = j.id"
                                        f" WHERE ({among[0]}){cond} ORDER BY j.submitted_at, j.id", args)]
    seen = set(ids)
    ids += [i for i in taken if i not in seen]
    if not ids:
        raise NotFound(f"no {among[1]} matches {selection.words()} (see jobman list)")
    return ids
