"""A store that ignores conditions is refused before anything is claimed; `stado doctor` checks a store;
`stado repair` clears corrupt records without losing the job; a cancel says who will stop the process."""
import time
from runkit.core.clock import SYSTEM, ManualClock
import json

import pytest

from stado.store import cas
from stado import jobs
from stado.core import keys
from stado.queue import lookup, submission
from stado.agent import Agent, AgentConfig
from stado.objectstore.metered import MeteredStore
from stado.objectstore import open_store
from stado.objectstore.memory import MemoryStore
from stado.core.spec import JobSpec
from stado.store.guarantees import VERDICT_KEY, UnsafeStore, ensure_safe, missing_guarantees
from stado.queue.submission import Submission

from .e2e.support import machine_status, stado, status_json, submit
from .faulty import IgnoresConditions


def agent(store, tmp_path, lines):
    return Agent(store, AgentConfig(work_root=str(tmp_path / "work"), stado_bin="/bin/false", poll_seconds=0.05,
                                    host="h", until_idle=True), log=lines.append)


@pytest.mark.parametrize("ignore", [("create",), ("match",), ("delete",)])
def test_an_agent_refuses_a_store_that_ignores_a_condition(tmp_path, ignore):
    inner = open_store(f"file://{tmp_path}/store")
    ran = tmp_path / "ran"
    job = submission.submit(inner, [Submission(JobSpec(f"touch {ran}"))], clock=SYSTEM)[0]
    lines = []
    with pytest.raises(UnsafeStore) as refused:
        agent(IgnoresConditions(inner, ignore), tmp_path, lines).run()
    message = str(refused.value)
    assert "\n" not in message and inner.url in message
    assert {"create": "create-if-absent", "match": "compare-and-swap", "delete": "conditional delete"}[ignore[0]] \
        in message
    assert refused.value.exit_code == 4
    assert not ran.exists() and lookup.view(inner, job["id"]).state == "queued"
    assert not list(inner.list(keys.AGENTS)) and not list(inner.list("control/probe"))
    assert list((tmp_path / "work" / "agents").iterdir()) == []  # its lock released


@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
def test_an_agent_behind_a_path_that_drops_conditions_refuses_whatever_verdict_another_left(store_target, tmp_path):
    """An honest agent ran on the store and left a safe verdict; an agent reaching the same URL through a
    proxy that drops every condition started on that verdict, and 2 of 150 jobs ran twice. Each agent probes its
    own path at every start: the second one refuses, claims nothing, and the verdict it read changes nothing."""
    inner = store_target.open()
    ensure_safe(inner, clock=SYSTEM)                                                   # the honest agent's start
    assert json.loads(inner.get(VERDICT_KEY).data)["safe"] is True
    ran = tmp_path / "ran"
    job = submission.submit(inner, [Submission(JobSpec(f"touch {ran}"))], clock=SYSTEM)[0]
    metered = MeteredStore(IgnoresConditions(inner))
    with pytest.raises(UnsafeStore):
        agent(metered, tmp_path, []).run()
    assert metered.counts["PUT"] >= 3                                    # it probed; it did not trust the verdict
    assert not ran.exists() and lookup.view(inner, job["id"]).state == "queued"
    assert not list(inner.list(keys.RUNNING))


def test_the_verdict_names_what_was_probed(tmp_path, monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    store = open_store(f"file://{tmp_path}/store")
    ensure_safe(store, clock=ManualClock(1000.0, 0.0))
    record = json.loads(store.get(VERDICT_KEY).data)
    assert record["store"] == store.url and record["path"]["where"] == store.url
    assert record["path"]["https_proxy"] == "proxy.example:3128"         # never the proxy's credentials


def test_the_real_backends_honour_every_condition(store_target):
    assert missing_guarantees(store_target.open()) == []


def test_doctor_checks_a_store(stado_env):
    done = stado(stado_env, "doctor")
    assert done.returncode == 0, done.stderr
    for check in ("reachable", "conditional writes", "clock skew", "queue listing"):
        assert check in done.stdout
    report = json.loads(stado(stado_env, "doctor", "--json").stdout)
    assert report["ok"] is True
    assert {c["check"]: c["verdict"] for c in report["checks"]}["conditional writes"] == "ok"


def test_doctor_says_an_unreachable_store_fails(tmp_path):
    config = tmp_path / "stado.toml"
    config.write_text('[store]\nurl = "s3://nobucket/x"\nendpoint = "http://127.0.0.1:9"\nregion = "us-east-1"\nallow_http = true\n'
                      "max_retries = 0\nretry_timeout = 1\n")
    env = {"PATH": "/usr/bin:/bin", "STADO_CONFIG": str(config), "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "y", "HOME": str(tmp_path)}
    done = stado(env, "doctor", "--json", ok=False)
    assert done.returncode == 4
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["checks"][0]["check"] == "reachable"


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_repair_records_a_job_whose_only_record_is_corrupt_as_failed(stado_env, store_target):
    store = store_target.open()
    job = submit(stado_env, "true")
    queued = cas.read(store, keys.queued(job), job)
    jobs.claim(store, queued[0], agent_id="gone", instance_ref="local@x", lease_expires_at=0,
               queued_version=queued[1], now=time.time())
    store.put(keys.running(job), b"{not json")
    assert f"`stado repair {job}` clears it" in stado(stado_env, "status").stdout
    done = stado(stado_env, "repair", job)
    assert "recorded as failed (internal)" in done.stdout and f"removed the corrupt running/{job}.json" in done.stdout
    status = machine_status(stado_env, job)
    assert (status["state"], status["terminal"], status["error"]["class"]) == ("failed", True, "internal")
    assert status["problems"] == []
    assert stado(stado_env, "repair", job).stdout.strip() == f"{job}: nothing to repair"


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_repair_removes_a_corrupt_record_beside_a_readable_one(stado_env, store_target):
    store = store_target.open()
    job = submit(stado_env, "true")
    store.put(keys.terminal("failed", job), b"garbage")
    stado(stado_env, "repair", job)
    assert machine_status(stado_env, job)["state"] == "queued"
    assert [e.key for e in store.list(keys.FAILED)] == [] and not status_json(stado_env)["problems"]


def test_cancel_of_a_job_whose_agent_is_silent_says_what_will_happen():
    store = MemoryStore()
    job = submission.submit(store, [Submission(JobSpec("sleep 100"))], clock=SYSTEM)[0]["id"]
    queued = cas.read(store, keys.queued(job), job)
    jobs.claim(store, queued[0], agent_id="a-dead-agent", instance_ref="local@far", lease_expires_at=0,
               queued_version=queued[1], now=time.time())
    report = jobs.cancel(store, job, by="op", clock=SYSTEM)
    assert report.kind == "cancelled_running"
    assert "next tick" not in report.message
    assert "a-dead-agent on local@far has no live record" in report.message and "reaper" in report.message
