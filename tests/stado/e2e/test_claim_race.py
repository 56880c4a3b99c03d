"""16 processes race to claim the same 200 jobs through stado's claim function, released together by a
barrier: every job has exactly one winner (the raw create-if-absent race is the contract suite's)."""
import multiprocessing

import pytest

from stado import jobs, keys
from stado.jobs import Submission
from stado.spec import JobSpec


def _racer(target, worker: int, ids: list[str], barrier, results) -> None:
    store = target.open()
    docs = {job_id: jobs.read(store, keys.queued(job_id), job_id)[0] for job_id in ids}
    barrier.wait(timeout=120)
    won = [job_id for job_id in ids
           if jobs.claim(store, docs[job_id], agent_id=f"w{worker}", instance_ref="local@race", lease_expires_at=0)]
    results.put((worker, won))


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_sixteen_processes_claim_each_job_once(store_target, store):
    ids = [doc["id"] for doc in jobs.submit(store, [Submission(JobSpec(f"job {n}")) for n in range(200)])]
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(16), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(store_target, n, ids, barrier, results)) for n in range(16)]
    for p in procs:
        p.start()
    wins = [results.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
    winners: dict[str, list[int]] = {}
    for worker, won in wins:
        for job_id in won:
            winners.setdefault(job_id, []).append(worker)
    assert sorted(winners) == sorted(ids)
    assert {job_id: w for job_id, w in winners.items() if len(w) != 1} == {}
    assert list(store.list(keys.QUEUE)) == []
    holders = {jobs.read(store, keys.running(i), i)[0]["owner"] for i in ids}
    assert holders <= {f"w{n}" for n in range(16)}
