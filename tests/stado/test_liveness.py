"""What keeps a running job alive once its promise has passed (docs/stado.md, "Liveness"): a newer pulse (the renewal
is failing, not the worker), a newer checkpoint (a big upload starves the renewal), or neither (reaped:
requeued once, failed on the second expiry). A real agent runs a real job; a store wrapper with the same
interface makes its renewals, and then its pulses, fail; the reaper is the real one."""
from stado.store.storeclock import StoreClock
from runkit.core.clock import SYSTEM
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from stado.store import cas
from stado.core import keys
from stado.queue import lookup, submission
from stado.agent import Agent, AgentConfig
from stado.objectstore.base import ObjectStore, StoreUnavailable
from stado.jobs.reaper import reap
from stado.core.spec import JobSpec

from .storekit import make_target, server_for
from tests.helpers import wait_for

STADO = str(Path(sys.executable).with_name("stado"))


class Muted(ObjectStore):
    """Fails the owner's renewals (put_if_match on running/) and, when told, its pulses."""

    def __init__(self, inner: ObjectStore):
        self.inner, self.url = inner, inner.url
        self.renewals_fail = self.pulses_fail = False
        self.dropped = {"renewal": 0, "pulse": 0}

    def put_if_match(self, key, data, version):
        if self.renewals_fail and key.startswith(keys.RUNNING):
            self.dropped["renewal"] += 1
            raise StoreUnavailable(f"renewal of {key} dropped (test)")
        return self.inner.put_if_match(key, data, version)

    def put(self, key, data):
        if self.pulses_fail and key.endswith("/heartbeat"):
            self.dropped["pulse"] += 1
            raise StoreUnavailable(f"pulse {key} dropped (test)")
        return self.inner.put(key, data)

    def silence(self, *, renewals: bool = True, pulses: bool = False) -> None:
        """Make the owner's renewals (and its pulses) fail, and return once one of each was dropped: no write of
        that kind is then in flight, so the promise read next is the last one the reaper can see. Pulses go first:
        a pulse in flight that lands after the last renewal's promise would otherwise keep the job alive."""
        for kind, wanted in (("pulse", pulses), ("renewal", renewals)):
            if wanted:
                before = self.dropped[kind]
                setattr(self, f"{kind}s_fail", True)
                wait_for(lambda kind=kind, before=before: self.dropped[kind] > before, timeout=20,
                         message=f"a {kind} dropped")

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def get(self, key):
        return self.inner.get(key)

    def put_if_absent(self, key, data):
        return self.inner.put_if_absent(key, data)

    def delete(self, key):
        return self.inner.delete(key)

    def delete_if_match(self, key, version):
        return self.inner.delete_if_match(key, version)

    def list(self, prefix):
        return self.inner.list(prefix)


@pytest.fixture(params=["file", "s3"])
def target(request, tmp_path):
    return make_target(request.param, tmp_path, server_for(request, request.param))


def _drive(store, tmp_path, script, gate):
    """Run an agent in this (main) thread while `script(agent, lines)` drives the test from another; the
    job ends (`gate`) and the agent is told to stop whatever happens there. Returns the agent's log."""
    lines: list[str] = []
    # The reaper margin the job's keeper stops it by is wide here (8 s: SIGTERM 2 s past the promise): these tests
    # reap with a margin of their own (0.5 s) within it, as a reaper more eager than the keeper would, so that the
    # worker, speaking again, takes its job back (re-adoption) or is kept alive by its evidence.
    agent = Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin=STADO, poll_seconds=0.2,
                                     settle_seconds=3600, schedules=False, host="h", kill_after=1, reap_margin=8.0),
                  log=lines.append)
    failure = []

    def controller():
        try:
            script(agent, lines)
        except BaseException as e:
            failure.append(e)
        finally:
            gate.touch()
            store.renewals_fail = store.pulses_fail = False
            signal.raise_signal(signal.SIGTERM)

    thread = threading.Thread(target=controller)
    thread.start()
    agent.run()
    thread.join()
    if failure:
        raise AssertionError(f"{failure[0]!r}\n" + "\n".join(lines[-30:])) from failure[0]
    return lines


def _promise(inner, job):
    """The promise as the reaper judges it: the running document's write time by the store's clock (as listed)
    plus its promised lease."""
    entry = next(e for e in inner.list(keys.RUNNING) if e.key == keys.running(job))
    return entry.modified + cas.read(inner, keys.running(job), job)[0]["lease_seconds"]


def _checkpointing_job(inner, tmp_path):
    gate, beat = tmp_path / "gate", tmp_path / "checkpointing"
    job = submission.submit(inner, [submission.Submission(JobSpec(
        f"n=0; while [ ! -e {gate} ]; do n=$((n+1)); if [ -e {beat} ]; then echo $n > c; "
        f"$STADO_BIN checkpoint put c --name step-$n > /dev/null; fi; sleep 0.1; done"))], clock=SYSTEM)[0]["id"]
    return job, gate, beat


def test_a_failing_renewal_with_fresh_pulses_is_not_reaped(target, tmp_path):
    inner = target.open()
    store = Muted(inner)
    job, gate, _ = _checkpointing_job(inner, tmp_path)

    def script(agent, lines):
        wait_for(lambda: lookup.view(inner, job).doc.get("process"), message="the job running")
        store.silence()                                                  # the renewal fails, the worker lives
        promise = _promise(inner, job)
        wait_for(lambda: time.time() > promise + 1.0, message="the promise to pass")
        verdict = reap(inner, writer="reaper", margin=0.5, now=time.time(), clock=StoreClock())
        assert verdict.alive["pulse"] == 1 and verdict.reaped == 0, str(verdict.as_json())

    _drive(store, tmp_path, script, gate)
    view = lookup.view(inner, job)
    assert (view.state, view.doc["requeues"]) == ("completed", 0)


def test_failing_renewals_and_pulses_with_fresh_checkpoints_are_not_reaped(target, tmp_path):
    inner = target.open()
    store = Muted(inner)
    job, gate, beat = _checkpointing_job(inner, tmp_path)

    def script(agent, lines):
        wait_for(lambda: lookup.view(inner, job).doc.get("process"), message="the job running")
        store.silence(pulses=True)                                       # neither renewals nor pulses land ...
        beat.touch()                                                     # ... but the job writes checkpoints
        promise = _promise(inner, job)
        wait_for(lambda: time.time() > promise + 1.0, message="the promise to pass")
        wait_for(lambda: any(e.modified > promise for e in inner.list(keys.checkpoint_prefix(job))), timeout=20,
                 message="a checkpoint after the promise")
        verdict = reap(inner, writer="reaper", margin=0.5, now=time.time(), clock=StoreClock())
        assert verdict.alive["checkpoint"] == 1 and verdict.reaped == 0, str(verdict.as_json())

    _drive(store, tmp_path, script, gate)
    view = lookup.view(inner, job)
    assert (view.state, view.doc["requeues"]) == ("completed", 0)


def test_neither_pulse_nor_checkpoint_requeues_once_then_fails(target, tmp_path):
    inner = target.open()
    store = Muted(inner)
    gate = tmp_path / "gate"
    job = submission.submit(inner, [submission.Submission(JobSpec(f"while [ ! -e {gate} ]; do sleep 0.1; done"))], clock=SYSTEM
                            )[0]["id"]

    def expire_and_reap():
        store.silence(pulses=True)
        promise = _promise(inner, job)
        wait_for(lambda: time.time() > promise + 1.0, message="the promise to pass")
        return reap(inner, writer="reaper", margin=0.5, now=time.time(), clock=StoreClock())

    def script(agent, lines):
        wait_for(lambda: lookup.view(inner, job).doc.get("process"), message="the job running")
        first = expire_and_reap()
        assert first.requeued == 1, first.as_json()
        store.renewals_fail = store.pulses_fail = False                  # it speaks again: takes the job back
        wait_for(lambda: any("already running here as process group" in line for line in lines), timeout=20,
                 message="the re-adoption")
        assert lookup.view(inner, job).doc["requeues"] == 1
        second = expire_and_reap()
        assert second.failed == 1, second.as_json()
        store.renewals_fail = store.pulses_fail = False
        wait_for(lambda: any("the job ended failed meanwhile" in line for line in lines), timeout=20,
                 message="the worker to learn its job failed")
        gate.touch()

    _drive(store, tmp_path, script, gate)
    view = lookup.view(inner, job)
    assert (view.state, view.terminal, view.doc["error"]["class"]) == ("failed", True, "worker_lease_expired")
