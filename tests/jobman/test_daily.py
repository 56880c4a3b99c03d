"""The small things of daily use: show's environment summary, --version, completion, usage,
wait --timeout's own exit code, group rm, prune --succeeded, the on-finish hook."""
import json
import re
import subprocess

from runkit.core.outcomes import EXIT_TIMED_OUT, EXIT_WAIT_TIMED_OUT
from tests.helpers import wait_for
from tests.jobman.conftest import JOBMAN


def test_show_sums_up_the_environment_and_env_lists_it(jobman):
    job_id = jobman.run("true", opts=["--env", "API_TOKEN=hunter2", "--env", "MODE=fast"],
                       env={"ONLY_AT_SUBMISSION": "1"})
    jobman("wait", job_id, check=True)
    shown = jobman.show(job_id)
    env = shown["environment"]
    assert env["count"] == len(shown["spec"]["env"])
    assert env["only_in_job"] == ["API_TOKEN", "MODE", "ONLY_AT_SUBMISSION"] and env["changed"] == []
    human = jobman("show", job_id, check=True).stdout
    assert f"environment: inherit, {env['count']} variables" in human
    assert "set with --env: API_TOKEN=**** MODE=fast" in human
    assert "differs from this shell: API_TOKEN (only in the job), MODE (only in the job)" in human
    assert "PATH=" not in human and "hunter2" not in human  # no full listing without --env
    full = jobman("show", "--env", job_id, check=True).stdout
    assert "PATH=" in full and "API_TOKEN=****" in full and "hunter2" not in full
    changed = jobman("show", job_id, env={"MODE": "slow", "NEW_HERE": "x"}, check=True).stdout
    assert "MODE (changed)" in changed and "NEW_HERE (not in the job)" in changed


def test_version_usage_and_wait_timeout_code():
    version = subprocess.run([JOBMAN, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and re.fullmatch(r"jobman \d+\.\d+\.\d+\n", version.stdout)
    bare = subprocess.run([JOBMAN], capture_output=True, text=True)
    assert bare.returncode == 2 and bare.stdout == "" and bare.stderr.startswith("usage: jobman")
    assert EXIT_WAIT_TIMED_OUT != EXIT_TIMED_OUT


def test_wait_timeout_is_told_apart_from_a_timed_out_job(jobman):
    slow = jobman.run("sleep", "30")
    timed_out = jobman.run("sleep", "30", opts=["--timeout", "0.2s", "--kill-after", "0.2s"])
    assert jobman("wait", timed_out).returncode == EXIT_TIMED_OUT == 124
    gave_up = jobman("wait", "--timeout", "0.2s", slow)
    assert gave_up.returncode == EXIT_WAIT_TIMED_OUT == 120 and "job 1" in gave_up.stderr
    jobman("cancel", slow, check=True)


def _bash_complete(jobman, line: str) -> list[str]:
    words = line.split(" ")
    script = (f'eval "$({JOBMAN} completion bash)"; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words) - 1}; _jobman; printf "%s\\n" "${{COMPREPLY[@]}}"')
    result = subprocess.run(["bash", "--norc", "-c", script], env=jobman.env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_bash_completion_completes_commands_flags_and_jobs(jobman):
    job_id = jobman.run("true", opts=["--name", "nightly-build"])
    jobman("wait", job_id, check=True)
    assert "restart" in _bash_complete(jobman, "jobman re")
    assert _bash_complete(jobman, "jobman restart --w") == ["--with-dependents"]
    assert _bash_complete(jobman, "jobman list --st") == ["--state"]
    assert sorted(_bash_complete(jobman, "jobman show ")) == ["1", "last", "nightly-build"]
    assert _bash_complete(jobman, "jobman logs night") == ["nightly-build"]
    assert _bash_complete(jobman, "jobman completion f") == ["fish"]
    # Values of --after*, --group and --state too.
    jobman("group", "set", "gpu", "--limit", "1", check=True)
    assert sorted(_bash_complete(jobman, "jobman run --after-success ")) == ["1", "last", "nightly-build"]
    assert _bash_complete(jobman, "jobman run --after nigh") == ["nightly-build"]
    assert sorted(_bash_complete(jobman, "jobman run --group ")) == ["default", "gpu"]
    assert _bash_complete(jobman, "jobman list --state succ") == ["succeeded"]
    assert "held" in _bash_complete(jobman, "jobman list --state ")
    for shell, needle in (("zsh", "bashcompinit"), ("fish", "complete -c jobman")):
        text = jobman("completion", shell, check=True).stdout
        assert needle in text and "restart" in text and "with-dependents" in text
    assert jobman("completion", "tcsh").returncode == 2


def test_completion_knows_every_command_and_flag(jobman):
    """The completion table agrees with the commands' own --help."""
    from jobman.cli import COMMANDS
    from jobman.cli.completion import FLAGS

    assert set(FLAGS) == {c for c in COMMANDS if not c.startswith("__")}
    for command, flags in FLAGS.items():
        helps = [jobman(command, "--help", check=True).stdout]
        if command == "group":
            helps += [jobman("group", action, "--help", check=True).stdout for action in ("set", "list", "rm", "pause", "resume")]
        # argparse's option lines: "  --name NAME", "  -f, --follow", "  -n N, --tail N"
        found = {f for text in helps
                 for f in re.findall(r"^ +(?:-\w(?: \S+)?, )?(--[a-z][a-z-]*)", text, re.M)} - {"--help"}
        assert found == set(flags.split()), command


def test_group_rm(jobman):
    jobman("group", "set", "nightly", "--limit", "1", check=True)
    job_id = jobman.run("true", opts=["--group", "nightly"])
    jobman("wait", job_id, check=True)
    refused = jobman("group", "rm", "nightly")
    assert refused.returncode == 2 and "still has 1 job(s)" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert jobman("group", "rm", "default").returncode == 2
    assert jobman("group", "rm", "nosuch").returncode == 2
    jobman("prune", check=True)
    assert jobman("group", "rm", "nightly", check=True).stdout == "removed group nightly\n"
    groups = [g["name"] for g in json.loads(jobman("group", "list", "--json", check=True).stdout)]
    assert groups == ["default"]


def test_prune_succeeded_keeps_the_failures(jobman):
    ok = jobman.run("true")
    bad = jobman.run("false")
    jobman("wait", ok, bad)
    assert jobman("prune", "--succeeded", check=True).stdout.endswith(": removed\nremoved 1 finished job(s)\n")
    assert [j["id"] for j in json.loads(jobman("list", "--json", check=True).stdout)] == [bad]


def test_prune_named_jobs_removes_those_or_nothing(jobman, tmp_path):
    """`jobman prune JOB...` removes the jobs named (and their logs), all of them or none."""
    first, second, third = (jobman.run("true") for _ in range(3))
    gate = tmp_path / "gate"
    running = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done")
    jobman("wait", first, second, third, check=True)
    refused = jobman("prune", first, running)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1 and "nothing was removed" in \
        refused.stderr, refused.stderr
    assert jobman.count_jobs() == 4
    assert json.loads(jobman("prune", first, "--json", check=True).stdout) == [first]
    assert not (jobman.home / "logs" / first).exists() and (jobman.home / "logs" / second).exists()
    assert jobman("prune", "nosuchjob").returncode == 2
    assert {j["id"] for j in json.loads(jobman("list", "--json", check=True).stdout)} == {second, third, running}
    gate.touch()
    jobman("wait", running, check=True)


def test_on_finish_hook_gets_the_outcome_and_cannot_change_it(jobman, tmp_path):
    out = tmp_path / "hook.out"
    hook = f'echo "$JOBMAN_JOB_ID $JOBMAN_JOB_HANDLE $JOBMAN_OUTCOME $JOBMAN_EXIT_CODE" >> {out}; exit 9'
    failed = jobman.run("sh", "-c", "exit 3", opts=["--on-finish", hook])
    assert jobman("wait", failed).returncode == 3
    wait_for(lambda: out.exists() and out.read_text(), timeout=20, message="the hook to run")
    assert out.read_text() == f"{failed} 1 failed 3\n"
    shown = wait_for(lambda: (s := jobman.show(failed)) and any(e["kind"] == "on_finish" for e in s["events"]) and s,
                     timeout=20, message="the hook to be recorded")
    event = next(e for e in shown["events"] if e["kind"] == "on_finish")
    assert event["exit_code"] == 9 and shown["outcome"] == "failed"  # the hook's failure changed nothing
    assert "on finish:   " + hook in jobman("show", failed, check=True).stdout
    blocker = jobman.run("sleep", "30")
    cancelled = jobman.run("true", opts=["--after-success", blocker, "--on-finish", f"echo $JOBMAN_OUTCOME >> {out}"])
    jobman("cancel", blocker, check=True)
    assert jobman("wait", cancelled).returncode == 122
    wait_for(lambda: out.read_text().endswith("dependency_failed\n"), timeout=20, message="the second hook")
    assert jobman("run", "--print-id", "--on-finish", "", "--", "true").returncode == 2


def _has_open(pid: int, name: str) -> bool:
    import os

    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}").endswith(name) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_wait_all_and_wait_group(jobman, tmp_path):
    """`jobman wait --all` and `--group G` (pueue's wait, tsp -w): every job of the home not yet pruned (of that
    group), finished ones included, the exit status mirroring them as for named jobs: the same answer however
    often it is asked, until the failure is pruned."""
    gate = tmp_path / "gate"
    jobman("group", "set", "g", "--limit", "4", check=True)
    ok = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done", opts=["--group", "g"])
    bad = jobman.run("sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.02; done; exit 3", opts=["--group", "g"])
    other = jobman.run("sh", "-c", f"while [ ! -e {gate}.other ]; do sleep 0.02; done")
    timed = jobman("wait", "--group", "g", "--timeout", "0.3")
    assert timed.returncode == 120
    with subprocess.Popen([JOBMAN, "wait", "--group", "g", "--json"], env=jobman.env, stdout=subprocess.PIPE,
                          text=True) as waiting:
        # It has read which jobs it waits for once it has the database open (and they are still gated).
        wait_for(lambda: _has_open(waiting.pid, "jobman.db"), message="the wait to open the database")
        gate.touch()
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 3 and [v["id"] for v in json.loads(out)["jobs"]] == [ok, bad]
    assert jobman.state(other)["phase"] != "finished"
    (tmp_path / "gate.other").touch()
    assert jobman("wait", "--all").returncode == 3  # `bad` failed, and it still counts
    again = jobman("wait", "--all")
    assert again.returncode == 3 and f"job {jobman.handle(bad)}: failed (exit status 3)" in again.stderr
    assert jobman("wait", "--group", "g").returncode == 3
    jobman("prune", bad, check=True)
    assert jobman("wait", "--all").returncode == 0 and jobman("wait", "--group", "g").returncode == 0
    assert jobman("wait").returncode == 2 and jobman("wait", "--group", "nosuch").returncode == 2
    assert jobman("wait", "--name", "nosuch*").returncode == 2


def test_run_hold_submits_a_held_job_that_release_lets_go(jobman, tmp_path):
    """jobman run --hold (pueue's stash): the job is held from its submission; release starts it. The hold is
    not part of its specification: its restart is not held."""
    out = tmp_path / "ran"
    job = jobman.run("sh", "-c", f"echo ran > {out}", opts=["--hold", "--name", "stashed"])
    shown = jobman.show(job)
    assert shown["held"] and shown["state"] != "succeeded" and "hold" not in shown["spec"]
    assert [e["kind"] for e in shown["events"]][:2] == ["job_submitted", "held"]
    listed = jobman("list", check=True).stdout.splitlines()
    assert listed[1].split()[2] == "held"
    assert jobman("wait", job, "--timeout", "0.5s").returncode == EXIT_WAIT_TIMED_OUT and not out.exists()
    jobman("release", "stashed", check=True)
    assert jobman("wait", job, "--timeout", "20s").returncode == 0 and out.read_text() == "ran\n"
    again = json.loads(jobman("restart", job, "--json", check=True).stdout)[0]["id"]
    assert jobman("wait", again, "--timeout", "20s").returncode == 0


def test_a_stopped_job_shows_as_stopped_and_its_cancel_does_not_wait_for_sigkill(jobman):
    """SIGSTOP (jobman signal JOB STOP) shows as `stopped` in list and show; its phase stays running. A cancel
    continues it after SIGTERM, so it ends at once, not after its kill-after."""
    job = jobman.run("sleep", "60", opts=["--kill-after", "30s"])
    wait_for(lambda: jobman.show(job)["phase"] == "running", message="running")
    jobman("signal", job, "STOP", check=True)
    wait_for(lambda: jobman.show(job)["state"] == "stopped", message="stopped")
    shown = jobman.show(job)
    assert shown["phase"] == "running" and shown["stopped"] is True
    assert "stopped" in jobman("show", job, check=True).stdout.splitlines()[1]
    row = jobman("list", check=True).stdout.splitlines()[1]
    assert row.split()[2] == "stopped" and "jobman signal JOB CONT" in row
    assert json.loads(jobman("list", "--json", check=True).stdout)[0]["state"] == "stopped"
    jobman("signal", job, "CONT", check=True)
    wait_for(lambda: jobman.show(job)["state"] == "running", message="running again")
    jobman("signal", job, "STOP", check=True)
    wait_for(lambda: jobman.show(job)["state"] == "stopped", message="stopped again")
    cancelled = subprocess.run([JOBMAN, "cancel", job], env=jobman.env, capture_output=True, text=True, timeout=20)
    assert cancelled.returncode == 0 and jobman.show(job)["state"] == "cancelled"
    attempt = jobman.show(job)["attempts_detail"][0]
    assert attempt["signal"] == "SIGTERM", attempt  # ended by the TERM it was continued to take, not a KILL
