"""`stado reap --watch`: a long-lived reaper keeps a watch across its passes, as an agent's reaper does, so a
job is reaped only once this reaper has also seen its record unchanged for the lease its worker promised,
on its own clock. A one-shot `stado reap` judges by the store's clock alone."""
from runkit.core.clock import SYSTEM
import json
import signal
import subprocess
import time

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import lookup, submission
from stado.core.spec import JobSpec
from tests.stado.e2e.support import STADO, stado


def _claimed_with_a_short_promise(store, lease: float = 0.5) -> str:
    job_id = submission.submit(store, [submission.Submission(JobSpec("train"))], clock=SYSTEM)[0]["id"]
    queued = cas.read(store, keys.queued(job_id), job_id)
    jobs.claim(store, queued[0], agent_id="gone", instance_ref="local@nowhere",
               lease_expires_at=time.time() + lease, queued_version=queued[1], now=time.time())
    return job_id


@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
def test_a_watching_reaper_reaps_only_after_it_has_watched_the_promised_lease(stado_env, store):
    job = _claimed_with_a_short_promise(store)
    # The promise passes by the store's clock, with room for a reading of it (S3 stamps whole seconds).
    entry = next(e for e in store.list(keys.RUNNING) if e.key == keys.running(job))
    promise = entry.modified + cas.read(store, keys.running(job), job)[0]["lease_seconds"]
    while time.time() < promise + 1.5:
        time.sleep(0.05)
    out = stado(stado_env, "reap", "--watch", "--every", "0.1", "--passes", "40", "--margin", "0", "--json").stdout
    passes = [json.loads(line) for line in out.splitlines()]
    assert len(passes) == 40
    # The first pass has seen the record for no time at all: it keeps the job, whatever the clocks say.
    assert passes[0]["reaped"] == 0 and passes[0]["alive_by_watch"] == 1, passes[0]
    first_reap = next(i for i, p in enumerate(passes) if p["reaped"])
    assert first_reap >= 3, passes[:first_reap + 1]  # watched for the 0.5 s lease at 0.1 s a pass
    assert passes[first_reap]["requeued"] == 1 and f"{job}: requeued" in passes[first_reap]["lines"][0]
    assert lookup.view(store, job).state == "queued"
    assert sum(p["reaped"] for p in passes) == 1


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_watching_reaper_stops_cleanly_on_sigterm_and_sigint(stado_env, store):
    for sig in (signal.SIGTERM, signal.SIGINT):
        with subprocess.Popen([STADO, "reap", "--watch", "--every", "0.05"], env=stado_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            try:
                assert proc.stdout.readline().startswith("reaped 0 ")  # its first pass is done: it is in its loop
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=10)
                assert proc.returncode == 0 and "Traceback" not in err, err
            finally:
                if proc.poll() is None:
                    proc.kill()


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_reap_options_that_need_watch_are_refused(stado_env):
    for args in (["--every", "1"], ["--passes", "2"], ["--watch", "--every", "0"], ["--watch", "--passes", "0"]):
        result = stado(stado_env, "reap", *args, ok=False)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
