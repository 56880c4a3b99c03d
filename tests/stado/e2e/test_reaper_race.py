"""A reaper and a renewal race on the same running document 1,000 times, from two processes released by a
barrier before every round: never both win, each side wins some rounds, and the store agrees
with what each side reported."""
import multiprocessing
import time

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.core import documents as d
from stado.jobs.reaper import LEASE_EXPIRED, lapse

ROUNDS = 1000


def _side(target, role: str, ids: list[str], barrier, results) -> None:
    try:
        store = target.open()
        docs = [cas.read(store, keys.running(job_id), job_id) for job_id in ids]
        won = []
        for job_id, (doc, version) in zip(ids, docs):
            barrier.wait(timeout=120)
            if role == "renewal":
                got = jobs.renew(store, doc, version, lease_expires_at=time.time() + 60, now=time.time())
                if not isinstance(got, jobs.Overtaken):
                    won.append(job_id)
            elif lapse(store, doc, version, writer="reaper", reason=LEASE_EXPIRED, now=time.time()) is not None:
                won.append(job_id)
        results.put((role, won))
    except BaseException as exc:
        barrier.abort()
        results.put((role, f"{type(exc).__name__}: {exc}"))
        raise


@pytest.mark.slow
@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
def test_a_reaper_and_a_renewal_never_both_win(store_target, store):
    ids = []
    expired = time.time() - 60
    for n in range(ROUNDS):
        job_id = f"0190{n:04d}-0000-7000-8000-000000000000"
        queued = d.queued_doc(job_id, {"command": f"job {n}"}, now=expired, submitter="test", nonce=cas.new_nonce())
        running = d.claim_doc(queued, agent_id="owner", instance_ref="local@race", now=expired,
                              lease_expires_at=expired + 5, nonce=cas.new_nonce())
        store.put_if_absent(keys.running(job_id), d.encode(running))
        ids.append(job_id)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_side, args=(store_target, role, ids, barrier, results))
             for role in ("renewal", "reaper")]
    for p in procs:
        p.start()
    outcome = dict(results.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(30)
    assert all(isinstance(won, list) for won in outcome.values()), outcome
    renewed, reaped = set(outcome["renewal"]), set(outcome["reaper"])
    assert renewed & reaped == set()
    assert renewed | reaped == set(ids)
    assert renewed and reaped, (len(renewed), len(reaped))
    for job_id in ids:  # the store says the same thing
        running = cas.read(store, keys.running(job_id), job_id)
        queued = cas.read(store, keys.queued(job_id), job_id)
        if job_id in renewed:
            assert running is not None and queued is None and running[0]["generation"] == 3
        else:
            assert running is None and queued is not None and queued[0]["requeues"] == 1
    print(f"renewal won {len(renewed)}, reaper won {len(reaped)} of {ROUNDS}")
