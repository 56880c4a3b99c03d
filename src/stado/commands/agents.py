"""`stado agent forget`: remove the record of an agent that is gone (a killed one never deletes its own), so that
`stado status` stops listing it. A live agent's record is refused: it would write it again at its next refresh,
and while it lives its record is what other agents and the reaper read of it."""
import json

from runkit.core.records import record

from ..core import keys
from ..core.admission import is_live, silent_for
from ..core.errors import BadInput, StadoError
from ..objectstore.base import NotFound, ObjectStore
from ..queue.selection import short_ids

Forgotten = record("Forgotten", "agent_id record message")


class AgentNotFound(StadoError):
    """No agent record has that id or prefix (exit 3, as a job that is not found)."""

    exit_code = 3


class AgentLive(StadoError):
    """The agent still speaks: its record is not removed (exit 1; nothing was written)."""


def forget(store: ObjectStore, selector: str, *, now: float) -> Forgotten:
    """Remove the record of the agent whose id is `selector`, or starts with it (as `stado status` shows ids),
    with a delete conditional on the version read: an agent that spoke again meanwhile keeps its record."""
    ids = [e.key[len(keys.AGENTS):].removesuffix(".json") for e in store.list(keys.AGENTS) if e.key.endswith(".json")]
    wanted = selector.strip().lower()
    matches = [i for i in ids if i == wanted] or [i for i in ids if wanted and i.startswith(wanted)]
    if not matches:
        raise AgentNotFound(f"no agent record {selector!r}: `stado status --all-agents` lists every agent with its id")
    if len(matches) > 1:
        shown = ", ".join(short_ids(ids)[i] for i in matches[:5])
        raise BadInput(f"agent id prefix {selector!r} is ambiguous: it matches {shown}; give more characters")
    agent_id = matches[0]
    try:
        blob = store.get(keys.agent(agent_id))
    except NotFound:
        raise AgentNotFound(f"agent {agent_id} has no record any more (it stopped, or was forgotten); nothing to do") \
            from None
    try:
        found = json.loads(blob.data)
    except ValueError:
        found = None
    found = found if isinstance(found, dict) else {}
    where = found.get("instance_ref") or "?"
    if found and is_live(found, now):
        silent = silent_for(found, now) or 0.0
        raise AgentLive(f"agent {agent_id} on {where} is live (seen {silent:.0f} s ago): stop it first (`stado agent "
                        "--drain`, or SIGTERM); nothing was removed")
    if not store.delete_if_match(keys.agent(agent_id), blob.version):
        raise AgentLive(f"agent {agent_id} on {where} rewrote its record meanwhile (it is live again?); nothing was "
                        "removed: look with `stado status` and run it again")
    return Forgotten(agent_id, found, f"agent {agent_id} on {where} forgotten (last seen {found.get('last_seen')})")
