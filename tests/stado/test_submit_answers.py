"""What `stado submit` says after a lost answer is what the store holds: a job that landed is reported queued (even
when the claim-order index entry or the read-back failed), one that provably did not is reported not submitted,
and one it cannot tell about is reported unknown, with its id. A retried write never makes a second job, and a
key (`--key`) makes running the same submit again return the same job. Each window is opened by a wrapper around a
real store (the local directory, SeaweedFS): tests/stado/scripted_faults.py."""
import time
from runkit.core.clock import SYSTEM
import socket
import threading

import pytest

from stado import jobs
from stado.core import keys
from stado.queue import lookup, readyindex, submission
from stado.store.cas import read_json
from stado.core.errors import BadInput, NotSubmitted, OutcomeUnknown
from stado.objectstore import StoreUnavailable, open_store
from stado.objectstore.file import FileStore
from stado.core.spec import JobSpec
from stado.store.landing import may_have_landed
from stado.queue.submission import Submission, queue_jobs

from .scripted_faults import Scripted
from .storekit import make_target, server_for
from .test_races import claim

SETTLE = 0.5  # seconds a write is tried again in these tests (the CLI's bound is submission.SETTLE_SECONDS)


@pytest.fixture(params=["file", "s3"])
def real(request, tmp_path):
    opened = make_target(request.param, tmp_path, server_for(request, request.param)).open()
    yield opened
    opened.close()


def job_of(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")


def records(store, prefix=""):
    return sorted(e.key for e in store.list(prefix))


def queue(store, *items, **kw):
    return queue_jobs(store, list(items) or [Submission(JobSpec("true"))], settle_seconds=SETTLE, **{"clock": SYSTEM, **kw})


def lifecycle_keys(store):
    return [k for k in records(store) if k.split("/")[0] + "/" in keys.STATE_PREFIXES.values()]


def test_a_lost_answer_to_the_create_is_read_back_and_makes_one_job(real):
    """The id is chosen before the first try and every try sends the same bytes: the retried create finds its
    own write (by its nonce) and no second job is made."""
    store = Scripted(real).on("put_if_absent", keys.QUEUE, lose=1)
    done = queue(store)
    [doc] = done.docs
    assert done.stopped is None and done.unknown is None
    assert lifecycle_keys(real) == [keys.queued(doc.id)]
    assert lookup.view(real, doc.id).doc.nonce == doc.nonce


def test_a_job_claimed_before_its_lost_answer_was_read_back_is_reported_queued(real):
    """The create landed, its answer was lost, and an agent claimed the job before the submit read queue/ back:
    before, the read-back found nothing and said `cannot reach` (exit 4) for a job that ran."""
    store = Scripted(real).on("put_if_absent", keys.QUEUE, lose=1)
    store.on("get", keys.QUEUE, before=lambda key: claim(real, job_of(key), "agent-a"))
    done = queue(store)
    [doc] = done.docs
    assert done.stopped is None
    assert lookup.view(real, doc.id).state == "running"
    assert lifecycle_keys(real) == [keys.running(doc.id)]


def test_a_create_that_failed_before_reaching_the_store_is_tried_again(real):
    store = Scripted(real).on("put_if_absent", keys.QUEUE, fail=2)
    done = queue(store)
    [doc] = done.docs
    assert done.stopped is None and lifecycle_keys(real) == [keys.queued(doc.id)]
    assert [c for c in store.calls if c[0] == "put_if_absent"] == [("put_if_absent", keys.queued(doc.id))] * 3


def test_a_job_whose_index_entry_failed_is_queued_and_the_agents_slow_pass_indexes_it(real):
    """Exit 0 with a note: the ledger entry is the job; before, the failed index write said `cannot reach`."""
    store = Scripted(real).on("put", keys.READY, fail=1000)
    done = queue(store)
    [doc] = done.docs
    assert done.stopped is None and list(done.unindexed) == [doc.id]
    assert records(real, keys.READY) == []
    assert readyindex.reconcile(real) == [f"{doc.id}: queued but missing from the claim-order index; indexed"]
    assert records(real, keys.READY) == [keys.ready(0, doc.id)]


def test_a_create_that_landed_while_the_store_went_away_is_unknown_with_its_id(real):
    """The create landed, its answer was lost, and the store stayed unreadable past the bound: the submit cannot
    tell, says so and names the job (exit 7). Before: `cannot reach` (exit 4) for a job that was queued."""
    store = Scripted(real)
    store.on("put_if_absent", keys.QUEUE, lose=1, after=store.down)
    done = queue(store)
    assert done.docs == [] and isinstance(done.stopped, OutcomeUnknown) and done.stopped.exit_code == 7
    job = done.unknown.id
    assert done.stopped.job_id == job
    assert str(done.stopped).startswith(f"could not tell whether job {job} was queued: cannot reach the store")
    assert f"`stado status {job}` tells once the store answers" in str(done.stopped)
    store.up()
    assert lookup.view(store, job).state == "queued"  # what `stado status` then tells


def test_a_create_refused_each_time_is_not_submitted_when_the_read_back_shows_nothing(real):
    """Every try failed before reaching the store and the read-back (a store of this host: nothing of a call is in
    flight once it has raised) shows no record: nothing was submitted, exit 4, and it says so."""
    store = Scripted(real).on("put_if_absent", keys.QUEUE, fail=1000)
    done = queue(store)
    assert done.docs == [] and done.unknown is None
    assert isinstance(done.stopped, NotSubmitted) and done.stopped.exit_code == 4
    assert str(done.stopped).endswith("; nothing was submitted")
    assert lifecycle_keys(real) == []


def test_a_batch_stopped_by_an_unknown_answer_reports_what_landed_and_names_the_unknown_job(real):
    store = Scripted(real)
    calls = {"n": 0}

    def second_lands_then_store_goes():
        calls["n"] += 1
        if calls["n"] == 2:
            store.down()
            raise StoreUnavailable("connection reset after the create was answered")

    store.on("put_if_absent", keys.QUEUE, after=second_lands_then_store_goes, times=3)
    items = [Submission(JobSpec(f"echo {n}")) for n in range(3)]
    done = queue(store, *items)
    assert len(done.docs) == 1 and done.unknown is not None
    assert isinstance(done.stopped, OutcomeUnknown)
    assert "(1 job(s) before it queued, their ids printed; the 1 after it not submitted)" in str(done.stopped)
    store.up()
    assert sorted(lifecycle_keys(real)) == sorted([keys.queued(done.docs[0].id), keys.queued(done.unknown.id)])


# -- --key ---------------------------------------------------------------------------------------------------

def keyed(command="true", key="nightly-2026-12-01", **spec):
    return Submission(JobSpec(command, **spec), key=key)


def test_the_same_key_returns_the_same_job_and_another_request_under_it_is_refused(real):
    first = queue(real, keyed())
    again = queue(real, keyed())
    assert first.stopped is None and again.stopped is None
    assert [d.id for d in again.docs] == [d.id for d in first.docs] and again.existing == [first.docs[0].id]
    before = records(real)
    with pytest.raises(BadInput) as refused:
        queue(real, keyed("false"))
    assert str(refused.value).startswith(f"--key nightly-2026-12-01 already submitted job {first.docs[0].id}, "
                                         "with another command or other flags; nothing was submitted")
    assert records(real) == before
    assert len(lifecycle_keys(real)) == 1


def test_a_run_stopped_between_the_key_and_the_job_is_finished_by_the_next_with_the_same_id(real):
    """The crash window of --key: the key's record landed, the job's did not. The next run with the key writes the
    very record the key holds (same id, same bytes), so a late copy of the first run's create is the same job."""
    broken = Scripted(real).on("put_if_absent", keys.QUEUE, fail=1000)
    stopped = queue(broken, keyed())
    assert isinstance(stopped.stopped, NotSubmitted) and "the same command again submits the job, once" in str(
        stopped.stopped)
    held = read_json(real, keys.submit_key("nightly-2026-12-01"))[0]
    assert lifecycle_keys(real) == []
    done = queue(real, keyed())
    [doc] = done.docs
    assert (doc.id, doc.nonce) == (held["job"], held["doc"]["nonce"])
    assert lifecycle_keys(real) == [keys.queued(held["job"])]


def test_a_lost_answer_to_the_key_record_is_recognised_as_ours(real):
    store = Scripted(real).on("put_if_absent", keys.SUBMIT_KEYS, lose=1)
    done = queue(store, keyed())
    [doc] = done.docs
    assert done.stopped is None and done.existing == []
    assert lifecycle_keys(real) == [keys.queued(doc.id)]
    assert read_json(real, keys.submit_key("nightly-2026-12-01"))[0]["job"] == doc.id


def test_two_runs_with_one_key_at_once_make_one_job(real):
    """Both read the key as new; the second one's create of the key's record is refused and it takes the job the
    first one wrote."""
    gate, started = threading.Event(), threading.Event()
    parked = Scripted(real).on("put_if_absent", keys.SUBMIT_KEYS,
                               before=lambda key: (started.set(), gate.wait(30)))
    box = {}
    slow = threading.Thread(target=lambda: box.update(done=queue(parked, keyed())))
    slow.start()
    assert started.wait(30)
    fast = queue(real, keyed())
    gate.set()
    slow.join(30)
    assert fast.stopped is None and box["done"].stopped is None
    assert [d.id for d in box["done"].docs] == [d.id for d in fast.docs]
    assert lifecycle_keys(real) == [keys.queued(fast.docs[0].id)]


def test_a_key_is_checked_before_anything_is_written(real):
    for bad in ("", "has space", "a/b", "-leading", "x" * 201, "caf\u00e9"):
        with pytest.raises(BadInput) as refused:
            queue(real, keyed(key=bad))
        assert str(refused.value).startswith("bad --key ") and "\n" not in str(refused.value)
    with pytest.raises(BadInput):
        queue(real, keyed("a"), keyed("b"))  # one key, two jobs of a batch
    assert records(real) == []


def test_a_keyed_job_that_ran_is_returned_not_run_again(real):
    [doc] = queue(real, keyed()).docs
    running, version = claim(real, doc.id, "agent-a")
    jobs.finish(real, running, version, {"outcome": "succeeded", "exit_code": 0, "signal": None, "error": None}, now=time.time())
    again = queue(real, keyed())
    assert [d.id for d in again.docs] == [doc.id] and again.existing == [doc.id]
    assert lifecycle_keys(real) == [keys.terminal("completed", doc.id)]


def test_rerun_takes_a_key_too(real):
    [doc] = submission.submit(real, [Submission(JobSpec("true"))], clock=SYSTEM)
    running, version = claim(real, doc.id, "agent-a")
    jobs.finish(real, running, version, {"outcome": "succeeded", "exit_code": 0, "signal": None, "error": None}, now=time.time())
    _, first = submission.rerun(real, doc.id, key="again-1", clock=SYSTEM)
    _, second = submission.rerun(real, doc.id, key="again-1", clock=SYSTEM)
    assert first.id == second.id != doc.id


# -- what an error says about its write ----------------------------------------------------------------------

def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _s3(endpoint: str, retries: int):
    return open_store("s3://stado/x", {"endpoint": endpoint, "allow_http": True, "max_retries": retries,
                                       "retry_timeout": 5, "connect_timeout": 1, "timeout": 2, "region": "us-east-1"},
                      env={"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"})


def _error(store):
    try:
        store.put_if_absent("queue/x.json", b"{}")
    except Exception as e:
        return e
    raise AssertionError("the write did not fail")


class _Answers:
    """A listener on 127.0.0.1 that answers every request with `reply` (bytes; None: closes the connection once the
    request has come)."""

    def __init__(self, reply):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                if self.reply is not None:
                    conn.sendall(self.reply)

    def close(self):
        self.sock.close()


def test_what_a_failed_write_may_have_done_is_read_from_the_client_s_report():
    """Real obstore errors, against real sockets: a refused connection sent nothing; a refusal stored nothing; a 5xx
    leaves a write decided (the read-back tells); a connection dropped after the request, or any retry before the
    last try, may still land."""
    assert may_have_landed(_error(_s3(f"http://127.0.0.1:{_closed_port()}", 0))) == (False, False)
    assert may_have_landed(_error(_s3(f"http://127.0.0.1:{_closed_port()}", 1))) == (True, True)
    listeners = {"dropped": _Answers(None),
                 "503": _Answers(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
                 "501": _Answers(b"HTTP/1.1 501 Not Implemented\r\nContent-Type: text/html\r\nContent-Length: 13\r\n"
                                 b"Connection: close\r\n\r\n<html></html>")}
    try:
        assert may_have_landed(_error(_s3(listeners["dropped"].endpoint, 0))) == (True, True)
        assert may_have_landed(_error(_s3(listeners["503"].endpoint, 0))) == (True, False)
        assert may_have_landed(_error(_s3(listeners["501"].endpoint, 0))) == (False, False)
    finally:
        for listener in listeners.values():
            listener.close()


def test_a_store_of_this_host_leaves_nothing_in_flight(tmp_path):
    """The local directory fails in the call (here its directory for writes in progress is a file): the write may
    have landed before, it cannot land after."""
    import shutil

    store = FileStore(str(tmp_path / "s"))
    shutil.rmtree(tmp_path / "s" / "tmp")
    (tmp_path / "s" / "tmp").write_text("")
    assert may_have_landed(_error(store)) == (True, False)
