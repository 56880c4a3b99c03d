"""Damaged documents for the fuzz tier: a real document of stado's (made by stado's own code), then a field
dropped or given a value of another type (at the top or one level down), the whole replaced by other JSON, or
the bytes truncated, flipped or replaced with garbage.

Two kinds of damage: TORN (what a disk or a crash does: bytes cut short, flipped, or garbage: never valid
JSON of the right shape by accident, or hardly ever) and MALFORMED (valid JSON whose fields have other types
or are missing: what a buggy or foreign writer, or a hand edit, leaves)."""
import copy
import json
import time

from hypothesis import strategies as st

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10)


TORN = ("truncated", "flipped", "garbage")
MALFORMED = ("fields", "other json")


@st.composite
def damaged(draw, base: dict, kinds=TORN + MALFORMED) -> bytes:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, 3)) if set(kinds) & set(MALFORMED) else 0):
        target = doc
        inner = sorted(k for k, v in doc.items() if isinstance(v, dict))
        if inner and draw(st.booleans()):
            target = doc[draw(st.sampled_from(inner))]
        key = draw(st.sampled_from(sorted(target) + ["extra"]))
        if draw(st.booleans()):
            target.pop(key, None)
        else:
            target[key] = draw(JSON)
    how = draw(st.sampled_from(kinds))
    data = json.dumps(draw(JSON) if how == "other json" else doc).encode()
    if how == "truncated":
        data = data[:draw(st.integers(0, max(0, len(data) - 1)))]
    elif how == "flipped" and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    elif how == "garbage":
        data = draw(st.binary(max_size=48))
    return data


# -- real documents, made by stado's own code (their stored JSON objects) ----------------------------------

def queued(job_id: str, command: str = "true", **spec) -> dict:
    from stado.core import documents as d
    from stado.store.cas import new_nonce
    from stado.core.spec import JobSpec

    return d.queued_doc(job_id, dict(JobSpec(command).to_json(), **spec), now=time.time(), submitter="fuzz",
                        nonce=new_nonce()).raw


def running(job_id: str) -> dict:
    from stado.core import documents as d
    from stado.store.cas import new_nonce

    now = time.time()
    return d.claim_doc(d.Job(queued(job_id)), agent_id="agent-fuzz", instance_ref="local@fuzz", now=now,
                       lease_expires_at=now - 60, nonce=new_nonce()).raw


def terminal(job_id: str, outcome: str = "succeeded") -> dict:
    from stado.core import documents as d
    from stado.store.cas import new_nonce

    res = d.result(outcome, exit_code=0 if outcome == "succeeded" else 1,
                   error_class=None if outcome == "succeeded" else "exit_code", message="fuzz")
    finishing = d.finishing_doc(d.Job(running(job_id)), res, now=time.time(), nonce=new_nonce())
    return d.terminal_doc(finishing, now=time.time(), nonce=new_nonce(), writer="agent-fuzz").raw


def cancelled(job_id: str) -> dict:
    from stado.core import documents as d
    from stado.store.cas import new_nonce

    cancelling = d.cancelling_doc(d.Job(running(job_id)), by="op", reason="fuzz", now=time.time(), nonce=new_nonce())
    return d.terminal_doc(cancelling, now=time.time(), nonce=new_nonce(), writer="agent-fuzz").raw


def manifest(job_id: str) -> dict:
    return {"job": job_id, "written_at": "2026-11-30T12:00:00.000Z",
            "artifacts": [{"name": "a.txt", "size": 3, "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}],
            "refused": [{"name": "../x", "reason": "unsafe name"}]}


def agent_record(agent_id: str = "01a22e00-0000-7000-8000-000000000001") -> dict:
    from stado.core import documents as d

    return {"agent": agent_id, "host": "fuzz", "instance_ref": "local@fuzz", "pid": 1, "slots": 2, "running": [],
            "capabilities": ["gpu"], "cores": 4, "memory": None, "accelerators": 0, "provider": "local",
            "spot": False, "last_seen": d.iso(time.time()), "stopping": False, "poll_seconds": 1.0,
            "refresh_seconds": 6.0, "live_for": 18.0, "generation": 3, "nonce": "n"}


def store_check() -> dict:
    return {"safe": True, "checked": time.time(), "checked_at": "2026-11-30T12:00:00.000Z", "store": "memory://x",
            "generation": 1, "nonce": "n"}


def pause_record() -> dict:
    return {"paused": True, "by": "op@host", "at": "2026-11-30T12:00:00.000Z", "reason": "maintenance",
            "generation": 1, "nonce": "n"}


def schedule(name: str = "nightly") -> dict:
    from stado.core.spec import JobSpec

    return {"schema": 1, "name": name, "cron": "* * * * *", "tz": "UTC", "spec": JobSpec("true").to_json(),
            "paused": False, "uid": "u", "created_at": "2026-11-30T12:00:00.000Z", "created_by": "op",
            "last_fired": 0, "skipped": 0, "fired": 0, "generation": 1, "nonce": "n"}
