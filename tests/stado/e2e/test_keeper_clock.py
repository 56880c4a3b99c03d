"""What a job's keeper writes carries the store's time, not its host's: on a host whose wall clock is 90 s behind
(libfaketime), the keeper of a job whose agent stopped renewing (SIGSTOP) stops it and requeues it, and the requeue's
`written_at` is the store's time now.

Before: the keeper stamped its verdicts and its bridge's renewals with the host's wall clock (standin.lapse_kept and
bridge took time.time()), so the record said 90 s ago; a bridge's promise on a host ahead by 10 minutes would have
kept a stopped job alive for 10 minutes in every reaper's eyes. Found by the soak: a keeper's `failed` record 88 s
before the runs it ended."""
import json
import signal
import time

import pytest

from stado.store import cas
from stado.core import keys
from stado.core.documents import parse_iso

from ..fakeclock import faked_clock
from .support import Agent, stop_between_writes, submit, wait_for

pytestmark = pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)


def test_a_keeper_on_a_host_90_s_behind_stamps_its_requeue_with_the_stores_time(stado_env, tmp_path, store):
    job = submit(stado_env, "sleep 60")
    # A poll of 1 s, not the suite's 0.1 s: on a loaded machine an agent a second late on its first renewal had its
    # job stopped and requeued by the keeper before the test stopped it, then claimed it again (the requeue unseen).
    agent = Agent(stado_env, tmp_path, "--reap-margin", "2", "--poll-seconds", "1", extra_env=faked_clock("-90"))
    try:
        wait_for(lambda: (cas.read(store, keys.running(job), job) or [{}])[0].get("process"), timeout=60,
                 message="its process recorded")
        stop_between_writes(agent.proc, store)  # it renews no more; its keeper stops the job and requeues it
        try:
            wait_for(lambda: cas.read(store, keys.queued(job), job), timeout=60, message="the keeper's requeue")
        except AssertionError as e:
            keepers = "".join(p.read_text(errors="replace") for p in agent.work_root.rglob("keeper.log"))
            raise AssertionError(f"{e}\n--- agent:\n{agent.log()}\n--- keeper:\n{keepers}") from e
        requeued = json.loads(store.get(keys.queued(job)).data)
        now = time.time()
    finally:
        agent.proc.send_signal(signal.SIGCONT)
        agent.stop()
    assert "its keeper stopped the job's processes" in json.dumps(requeued)
    assert abs(parse_iso(requeued["written_at"]) - now) < 10, (requeued["written_at"], now)
