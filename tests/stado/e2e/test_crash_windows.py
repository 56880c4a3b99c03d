"""The two-write transitions' crash windows, each opened by a fault point (STADO_FAULT_POINT): readers
show the right state, nothing runs twice, and the next pass finishes the move."""
from .support import machine_status, run_until_idle, stado, submit

FAULT_EXIT = 86


def test_claim_written_but_queue_entry_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID >> {ran}")
    crashed = run_until_idle(stado_env, tmp_path, name="crashing", extra_env={"STADO_FAULT_POINT": "claim-written"})
    assert crashed.returncode == FAULT_EXIT, crashed.log()
    assert {e.key for e in store.list("queue/")} == {f"queue/{job}.json"}
    assert {e.key for e in store.list("running/")} == {f"running/{job}.json"}
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["moving"]) == ("running", False, ["queued"])
    assert job in stado(stado_env, "status").stdout

    after = run_until_idle(stado_env, tmp_path, name="next")
    assert after.returncode == 0, after.log()
    assert not ran.exists(), "the claimed job must not run a second time beside its claim"
    assert list(store.list("queue/")) == []  # the move is finished
    status = machine_status(stado_env, job)
    assert (status["state"], status["moving"]) == ("running", [])  # held by the crashed agent's claim (reaper's)


def test_terminal_written_but_running_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo $WC_JOB_ID >> {ran}; exit 4")
    crashed = run_until_idle(stado_env, tmp_path, name="crashing",
                             extra_env={"STADO_FAULT_POINT": "terminal-written"})
    assert crashed.returncode == FAULT_EXIT, crashed.log()
    assert {e.key for e in store.list("failed/")} == {f"failed/{job}.json"}
    assert {e.key for e in store.list("running/")} == {f"running/{job}.json"}
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["outcome"], status["exit_code"], status["moving"]) == (
        "failed", True, "failed", 4, ["running"])

    after = run_until_idle(stado_env, tmp_path, name="next")
    assert after.returncode == 0
    assert "finished an interrupted move to failed" in after.log()
    assert list(store.list("running/")) == []
    assert ran.read_text().split() == [job]  # ran exactly once
    assert machine_status(stado_env, job)["moving"] == []


def test_cancel_written_but_queue_entry_not_deleted(stado_env, tmp_path, store):
    ran = tmp_path / "ran.txt"
    job = submit(stado_env, f"echo ran >> {ran}")
    cancel = stado({**stado_env, "STADO_FAULT_POINT": "cancel-written"}, "cancel", job, ok=False)
    assert cancel.returncode == FAULT_EXIT
    assert machine_status(stado_env, job)["state"] == "cancelled"
    assert {e.key for e in store.list("queue/")} == {f"queue/{job}.json"}
    run_until_idle(stado_env, tmp_path)
    assert not ran.exists()
    assert list(store.list("queue/")) == [] and list(store.list("running/")) == []
    assert machine_status(stado_env, job)["moving"] == []
