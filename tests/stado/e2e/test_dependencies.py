"""A pipeline with dependencies through the real CLI and real `stado agent` processes, on the local directory and
on SeaweedFS: prepare -> train x3 (one fails) -> evaluate (after-success on all three) and report (after-failure
on the failing stage), submitted once as flags and once as a batch file."""
import json

import pytest

from .support import machine_status, run_until_idle, stado, submit


def _pipeline_by_flags(env, tmp_path) -> dict[str, str]:
    marks = tmp_path / "marks"
    marks.mkdir()
    ids = {"prepare": submit(env, f"sleep 0.5; touch {marks}/prepare", "--name", "prepare")}
    for n in (1, 2, 3):
        fails = "; exit 3" if n == 2 else ""
        ids[f"train{n}"] = submit(env, f"test -e {marks}/prepare && touch {marks}/train{n}{fails}", "--name",
                                  f"train{n}", "--after-success", "prepare")
    ids["evaluate"] = submit(env, f"touch {marks}/evaluate", "--name", "evaluate", "--after-success", "train1",
                             "--after-success", "train2", "--after-success", ids["train3"][:23])
    ids["publish"] = submit(env, f"touch {marks}/publish", "--after-success", "evaluate")
    ids["report"] = submit(env, f"test -e {marks}/train2 && touch {marks}/report", "--after-failure", "train2")
    ids["cleanup"] = submit(env, f"touch {marks}/cleanup", "--after", "evaluate")
    return ids


def _pipeline_by_batch(env, tmp_path) -> dict[str, str]:
    marks = tmp_path / "marks"
    marks.mkdir()
    entries = [{"name": "prepare", "command": f"sleep 0.5; touch {marks}/prepare"}]
    for n in (1, 2, 3):
        entries.append({"name": f"train{n}", "after_success": "prepare",
                        "command": f"test -e {marks}/prepare && touch {marks}/train{n}" + ("; exit 3" if n == 2 else "")})
    entries += [{"name": "evaluate", "command": f"touch {marks}/evaluate", "after_success": ["train1", "train2",
                                                                                            "train3"]},
                {"name": "publish", "command": f"touch {marks}/publish", "after_success": "evaluate"},
                {"name": "report", "command": f"test -e {marks}/train2 && touch {marks}/report",
                 "after_failure": ["train2"]},
                {"name": "cleanup", "command": f"touch {marks}/cleanup", "after": "evaluate"}]
    batch = tmp_path / "pipeline.json"
    batch.write_text(json.dumps(entries))
    made = json.loads(stado(env, "submit", "--batch", str(batch), "--json").stdout)["jobs"]
    return {entry["name"]: job["id"] for entry, job in zip(entries, made)}


@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
@pytest.mark.parametrize("submitted", [_pipeline_by_flags, _pipeline_by_batch], ids=["flags", "batch"])
def test_a_pipeline_with_a_failing_stage(stado_env, tmp_path, store_target, submitted):
    ids = submitted(stado_env, tmp_path)
    queued = json.loads(stado(stado_env, "status", "evaluate", "--json").stdout)
    assert queued["state"] == "queued" and queued["waiting"].startswith(f"dependency {ids['train1']} (--after-success)")
    agent = run_until_idle(stado_env, tmp_path, "--slots", "3", timeout=120)
    assert agent.returncode == 0, agent.log()
    marks = tmp_path / "marks"
    seen = {job: machine_status(stado_env, job_id) for job, job_id in ids.items()}
    outcomes = {job: data["outcome"] for job, data in seen.items()}
    assert outcomes == {"prepare": "succeeded", "train1": "succeeded", "train2": "failed", "train3": "succeeded",
                        "evaluate": "dependency_failed", "publish": "dependency_failed", "report": "succeeded",
                        "cleanup": "succeeded"}, agent.log()
    assert sorted(p.name for p in marks.iterdir()) == ["cleanup", "prepare", "report", "train1", "train2", "train3"]
    evaluate = json.loads(stado(stado_env, "status", "evaluate", "--json").stdout)
    assert evaluate["dependency"] == {"job": ids["train2"], "condition": "after_success", "state": "failed"}
    assert evaluate["state"] == "failed" and ids["train2"] in evaluate["error"]["message"]
    publish = json.loads(stado(stado_env, "status", ids["publish"], "--json").stdout)
    assert publish["dependency"] == {"job": ids["evaluate"], "condition": "after_success", "state": "failed"}
    text = stado(stado_env, "status", "evaluate").stdout
    assert f"dependency:       {ids['train2']} (after_success) ended failed" in text
    waited = stado(stado_env, "wait", "evaluate", ok=False)
    assert waited.returncode == 122, waited.stderr  # dependency_failed, as jobman wait says it
    assert stado(stado_env, "wait", ids["report"], ids["cleanup"]).returncode == 0
    log = agent.log()
    assert f"{ids['evaluate']}: dependency -> failed" in log and f"{ids['evaluate']}: started" not in log


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_bad_dependency_and_retry_flags_exit_2_or_3_and_write_nothing(stado_env, tmp_path):
    for flags, code, words in ((["--after-success", "nosuch"], 3, "--after-success nosuch: no job has the id or "
                                "name 'nosuch'; nothing was submitted"),
                               (["--retry-backoff", "0.5"], 2, "bad --retry-backoff '0.5'"),
                               (["--retry-delay", "soon"], 2, "bad --retry-delay"),
                               (["--retryable-exit-code", "0"], 2, "bad --retryable-exit-code 0")):
        proc = stado(stado_env, "submit", *flags, "true", ok=False)
        assert proc.returncode == code and words in proc.stderr, (flags, proc.returncode, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(stado(stado_env, "status", "--json").stdout)["jobs"] == []


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_a_retry_waits_its_delay_and_only_retryable_exits_retry(stado_env, tmp_path):
    count = tmp_path / "count"
    flaky = submit(stado_env, f"echo x >> {count}; exit 2", "--retries", "2", "--retryable-exit-code", "2",
                   "--retry-delay", "1s", "--retry-backoff", "exponential")
    other = submit(stado_env, "exit 5", "--retries", "2", "--retryable-exit-code", "2")
    agent = run_until_idle(stado_env, tmp_path, "--slots", "2", timeout=60)
    assert agent.returncode == 0, agent.log()
    assert count.read_text() == "x\nx\nx\n"
    flaky_done, other_done = machine_status(stado_env, flaky), machine_status(stado_env, other)
    assert (flaky_done["failures"], flaky_done["exit_code"]) == (2, 2)
    assert (other_done["failures"], other_done["exit_code"]) == (0, 5)
    claims = [line[:24] for line in agent.log().splitlines() if f"{flaky}: claimed" in line]
    from stado.core.documents import parse_iso

    gaps = [parse_iso(b) - parse_iso(a) for a, b in zip(claims, claims[1:])]
    assert len(gaps) == 2 and gaps[0] >= 1.0 and gaps[1] >= 2.0, (gaps, agent.log())
