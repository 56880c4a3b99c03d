"""What a job's shell is given, and what of its output leaves the machine."""
import json
import os
import sys

import pytest

from stado.agent.environment import JOB_NAMES, is_runtime_name

from .support import machine_status, run_until_idle, stado, submit

SECRET = "s3cr3t-value-0f-the-agent"
AWS_SHAPED = "AKIAIOSFODNN7EXAMPLE"


def test_the_job_shell_environment_is_exactly_the_allowed_list(stado_env, tmp_path):
    dump = tmp_path / "env.json"
    job = submit(stado_env, f"{sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))' > {dump}",
                 "--cores", "3")
    agent_env = {**stado_env, "ONLY_IN_THE_AGENT": "1", "MY_API_TOKEN": SECRET, "LC_ALL": "C.UTF-8",
                 "https_proxy": "http://proxyuser:proxypass1@127.0.0.1:9"}
    run_until_idle(agent_env, tmp_path, "--cores", "4", extra_env=agent_env)
    assert machine_status(stado_env, job)["state"] == "completed"
    seen = json.loads(dump.read_text())
    expected = {k for k in agent_env if is_runtime_name(k)} | set(JOB_NAMES) | {"PWD"}  # PWD: /bin/sh's own
    assert set(seen) == expected
    assert "ONLY_IN_THE_AGENT" not in seen and "MY_API_TOKEN" not in seen and "STADO_CONFIG" not in seen
    assert seen["WC_JOB_ID"] == job and seen["CARGO_BUILD_JOBS"] == "3"
    assert seen["GIT_TERMINAL_PROMPT"] == "false" and seen["CARGO_NET_GIT_FETCH_WITH_CLI"] == "true"
    assert seen["WC_ARTIFACT_INPUTS_JSON"] == "[]" and seen["STADO_BIN"].endswith("/stado")
    assert seen["WC_JOB_STARTED_AT"].endswith("Z") and seen["LC_ALL"] == "C.UTF-8"
    assert seen["PWD"].startswith(str(tmp_path / "work" / "jobs" / job))


def test_uploaded_output_is_redacted(stado_env, tmp_path, store):
    agent_env = {**stado_env, "MY_API_TOKEN": SECRET}
    script = (f"echo token {SECRET} end; echo key {AWS_SHAPED}; echo 'Authorization: Bearer abcdef1234567890xyz'; "
              "printf -- '-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEA\\n-----END RSA PRIVATE KEY-----\\n'; "
              "echo ghp_abcdefghijklmnopqrstuvwxyz0123456789; echo plain words stay; "
              # the agent's own environment, read behind its back (the agent is the job shell's parent)
              "tr '\\0' '\\n' < /proc/$PPID/environ")
    job = submit(stado_env, script)
    run_until_idle(agent_env, tmp_path, extra_env=agent_env)
    watched = stado(stado_env, "job", "watch", job).stdout
    uploaded = b"".join(store.get(e.key).data for e in store.list(f"status/{job}/output/")).decode()
    assert watched == uploaded
    for leaked in (SECRET, AWS_SHAPED, "abcdef1234567890xyz", "MIIEpAIBAAKCAQEA", "ghp_abcdefghij"):
        assert leaked not in uploaded
    assert "token [REDACTED] end" in uploaded and "plain words stay" in uploaded
    assert "MY_API_TOKEN=[REDACTED]" in uploaded  # the agent's environment did reach the output, masked
    for name, value in stado_env.items():  # the store's credentials among them
        if name.startswith(("AWS_SECRET", "AZURE_STORAGE_ACCOUNT_KEY")):
            assert value not in uploaded


@pytest.mark.parametrize("store_target", ["s3"], indirect=True)
def test_a_job_that_calls_stado_bin_reaches_the_store_its_agent_serves(stado_env, tmp_path):
    """STADO_BIN runs the agent's own program for a job that calls Stado back. On SeaweedFS the job's
    environment names no STADO_CONFIG and no credentials, yet its `$STADO_BIN submit` lands in the fleet's store."""
    seen = tmp_path / "seen.json"
    parent = submit(stado_env, f"{sys.executable} -c 'import json, os; print(json.dumps(dict(os.environ)))' > {seen}; "
                               "$STADO_BIN submit 'echo child' --name child-of-$WC_JOB_ID")
    agent = run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, parent)["state"] == "completed", agent.log()
    env = json.loads(seen.read_text())
    assert "STADO_CONFIG" not in env and not [k for k in env if k.startswith(("AWS_", "AZURE_", "GOOGLE_"))]
    child = machine_status(stado_env, f"child-of-{parent}")  # by the fleet's configuration: it is there
    assert child["state"] == "completed" and child["command"] == "echo child"  # and the same agent ran it
    table = stado(stado_env, "status").stdout
    assert f"child-of-{parent}" in table


def test_stado_bin_reaches_the_default_store_of_an_agent_with_no_configuration(tmp_path):
    """No STADO_CONFIG: the agent serves the per-user directory of its own environment (XDG_DATA_HOME), which
    the job's cleared environment does not carry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STADO_", "AWS_", "AZURE_", "GOOGLE_"))}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    parent = submit(env, "$STADO_BIN submit 'echo child' --name child")
    agent = run_until_idle(env, tmp_path)
    assert machine_status(env, parent)["state"] == "completed", agent.log()
    assert machine_status(env, "child")["state"] == "completed"
