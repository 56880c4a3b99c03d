"""A real agent (in this process, real job processes, a real local-directory store) meets torn records all over
the store: a queued job's entry and its claim-order index entry, a running record whose worker is gone, a
terminal record beside a leftover queue entry, an input producer's result manifest, another agent's record,
the store-check verdict. It keeps going: it exits normally once idle, every good job completes, and each
damaged job is left as it was (reported, never overwritten on a guess) or settled by the documented rule."""
import json
import time

from hypothesis import example, given, strategies as st

from stado.core import documents as d
from stado.core import keys
from stado.queue import readyindex
from stado.agent import Agent, AgentConfig
from stado.queue.lookup import view
from stado.objectstore import open_store

from . import corruption as c
from tests.fuzzing import examples

GOOD = [f"01a22e00-0000-7000-8000-0000000001{n:02d}" for n in range(3)]
VICTIM = {  # where damage may land, and the job it belongs to
    "queue": "01a22e00-0000-7000-8000-000000000201", "running": "01a22e00-0000-7000-8000-000000000202",
    "terminal": "01a22e00-0000-7000-8000-000000000203", "manifest": "01a22e00-0000-7000-8000-000000000204",
}
CONSUMER = "01a22e00-0000-7000-8000-000000000205"  # waits for the manifest's job's artifact


def _put(store, doc):
    store.put(keys.state_key(doc["state"], doc["id"]), json.dumps(doc).encode())


def _damage(kinds=c.TORN):
    return st.fixed_dictionaries({}, optional={
        "queue": c.damaged(c.queued(VICTIM["queue"]), kinds),
        "running": c.damaged(c.running(VICTIM["running"]), kinds),
        "terminal": c.damaged(c.terminal(VICTIM["terminal"]), kinds),
        "manifest": c.damaged(c.manifest(VICTIM["manifest"]), kinds),
        "agent": c.damaged(c.agent_record(), kinds),
        "store-check": st.binary(max_size=40),
    })


def _lay_out(store, damage: dict) -> None:
    for job_id in GOOD:
        doc = c.queued(job_id, "true")
        _put(store, doc)
        readyindex.index(store, d.Job(doc))
    if "queue" in damage:
        store.put(keys.queued(VICTIM["queue"]), damage["queue"])
        store.put(keys.ready(0, VICTIM["queue"]), damage["queue"])
    if "running" in damage:
        store.put(keys.running(VICTIM["running"]), damage["running"])
    if "terminal" in damage:
        store.put(keys.terminal("completed", VICTIM["terminal"]), damage["terminal"])
        leftover = c.queued(VICTIM["terminal"])
        _put(store, leftover)
        readyindex.index(store, d.Job(leftover))
    if "manifest" in damage:
        _put(store, c.terminal(VICTIM["manifest"]))
        store.put(keys.manifest(VICTIM["manifest"]), damage["manifest"])
        consumer = c.queued(CONSUMER, "true", inputs=[{"job": VICTIM["manifest"], "name": "a.txt"}])
        _put(store, consumer)
        readyindex.index(store, d.Job(consumer))
    if "agent" in damage:
        store.put(keys.agent("01a22e00-0000-7000-8000-000000000301"), damage["agent"])
    if "store-check" in damage:
        store.put("control/store-check.json", damage["store-check"])


@examples(10)
@given(_damage())
def test_an_agent_meeting_torn_records_goes_on_and_the_other_jobs_finish(tmp_path_factory, damage):
    _run_agent_over(tmp_path_factory, damage)


def _bad_priority() -> bytes:
    doc = c.running(VICTIM["running"])
    doc["spec"]["priority"] = [None]
    return json.dumps(doc).encode()


@examples(10)
@given(_damage(c.MALFORMED))
@example(damage={"running": _bad_priority()})
def test_an_agent_meeting_malformed_records_goes_on_and_the_other_jobs_finish(tmp_path_factory, damage):
    _run_agent_over(tmp_path_factory, damage)


def _run_agent_over(tmp_path_factory, damage) -> None:
    root = tmp_path_factory.mktemp("agent")
    store = open_store(f"file://{root}/store")
    _lay_out(store, damage)
    lines: list[str] = []
    agent = Agent(store, AgentConfig(work_root=str(root / "work"), stado_bin="/bin/false", poll_seconds=0.05,
                                     settle_seconds=0.2, host="fuzz", until_idle=True, schedules=False),
                  log=lines.append)
    started = time.monotonic()
    assert agent.run() == 0
    log = "\n".join(lines)
    assert time.monotonic() - started < 60, log
    for job_id in GOOD:
        assert view(store, job_id).state == "completed", log
    assert "Traceback" not in log
    if "manifest" in damage:  # the consumer cannot get its input: it ends, and says why
        consumer = view(store, CONSUMER)
        assert consumer.state in ("completed", "failed"), log
