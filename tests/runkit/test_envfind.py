"""Finding processes by a variable in their environment: real processes, a double fork into a session
of their own, a process that never had the variable."""
import os
import subprocess
import uuid

from runkit.system import envfind
from tests.helpers import kill_all, wait_for


def test_finds_a_double_forked_daemon_in_its_own_session_and_nothing_else(tmp_path):
    value = uuid.uuid4().hex
    pidfile = tmp_path / "daemon.pid"
    env = {**os.environ, "FIND_ME": value}
    # The child exits at once; its grandchild is re-parented and leads a session of its own.
    subprocess.run(["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' &"], env=env, check=True)
    other = subprocess.Popen(["sleep", "30"], env={k: v for k, v in os.environ.items() if k != "FIND_ME"})
    try:
        daemon = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), message="the daemon"))
        assert os.getsid(daemon) == daemon != os.getsid(0)
        found = wait_for(lambda: envfind.processes_with("FIND_ME", {value}).get(value), message="a match")
        assert [st.pid for st in found] == [daemon]
        assert found[0].start_time > 0
        assert other.pid not in [st.pid for sts in envfind.processes_with("FIND_ME").values() for st in sts]
        assert envfind.processes_with("FIND_ME", {"no-such-value"}) == {}
    finally:
        kill_all([other.pid] + ([daemon] if pidfile.exists() else []))
        other.wait()


def test_the_value_is_read_exactly():
    assert envfind._value_of(b"A=1\0FIND_ME=abc\0B=2\0", b"FIND_ME=") == b"abc"
    assert envfind._value_of(b"FIND_ME=abc", b"FIND_ME=") == b"abc"
    assert envfind._value_of(b"NOT_FIND_ME=abc\0", b"FIND_ME=") is None
    assert envfind._value_of(b"A=FIND_ME=x\0", b"FIND_ME=") is None
