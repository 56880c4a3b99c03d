"""Transfers no clock ends (docs/stado.md, "Transfers"): a slow store (a throttling proxy in front of SeaweedFS), a
store that stops moving, inputs that resume, and an agent that stays responsive while bytes move."""
import hashlib
import json
import os
import pty
import re
import signal
import subprocess
import threading
import time

import pytest

from stado.core import keys

from .support import MB, STADO, Agent, machine_status, produce, run_until_idle, stado, submit, wait_for

s3_only = pytest.mark.parametrize("store_target", ["s3"], indirect=True)


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@s3_only
def test_results_of_50_mb_at_5_mb_per_s_completes_with_a_2_s_request_timeout(stado_env, slow, tmp_path, store):
    proxy, slow_env = slow
    job, sha = produce(stado_env, tmp_path, store, 50 * MB)
    proxy.rate = 5 * MB
    out = tmp_path / "out"
    master, terminal = pty.openpty()  # stderr on a terminal: progress is shown there
    shown = []
    threading.Thread(target=lambda: _drain(master, shown), daemon=True).start()
    began = time.monotonic()
    proc = subprocess.run([STADO, "results", job, str(out)], env=slow_env(timeout=2), stdout=subprocess.PIPE,
                          stderr=terminal, text=True, timeout=180)
    took = time.monotonic() - began
    os.close(terminal)
    assert proc.returncode == 0, b"".join(shown).decode(errors="replace")
    assert _sha256(out / "big.bin") == sha and "1 artifact(s)" in proc.stdout
    assert took >= 50 / 5 * 0.8, "the transfer really went through the throttled link"
    progress = b"".join(shown).decode(errors="replace")
    assert re.search(r"results of \S+: [\d.]+ MB of 50\.0 MB", progress), progress
    assert not list(out.glob(".stado-partial-*")), "nothing left behind"
    print(f"\n50 MB at 5 MB/s with a 2 s request timeout: {took:.1f} s")


def _drain(fd, into):
    try:
        while chunk := os.read(fd, 4096):
            into.append(chunk)
    except OSError:
        pass


@s3_only
def test_a_results_transfer_that_stops_moving_is_ended_after_the_stall_window_and_resumes(stado_env, slow, tmp_path,
                                                                                         store):
    proxy, slow_env = slow
    job, sha = produce(stado_env, tmp_path, store, 20 * MB)
    proxy.rate = 5 * MB
    env = slow_env(timeout=2, stall_timeout=2)
    out = tmp_path / "out"
    proc = subprocess.Popen([STADO, "results", job, str(out)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: proxy.down > 6 * MB, timeout=60, message="6 MB through the proxy")
    proxy.stall()
    stalled = time.monotonic()
    _, err = proc.communicate(timeout=60)
    ended_after = time.monotonic() - stalled
    assert proc.returncode == 4, err
    assert len(err.strip().splitlines()) == 1 and "stopped moving" in err and "no bytes moved for 2 s" in err, err
    assert 2 - 0.5 <= ended_after < 10, ended_after  # the window runs from the last range in (1/8 of it)
    _resumes(proxy, env, job, out, sha)


def _resumes(proxy, env, job, out, sha) -> None:
    """What an interrupted `stado results` of a 20 MB artifact kept in `out` is taken up by the next run, once
    the link moves again: only the rest crosses it."""
    [partial] = [p for p in out.glob(".stado-partial-*") if p.suffix != ".json"]
    kept = partial.stat().st_size
    assert kept > 2 * MB
    proxy.resume()
    before = proxy.down
    stado(env, "results", job, str(out))
    assert _sha256(out / "big.bin") == sha
    assert proxy.down - before < 20 * MB - kept + 2 * MB, "the second run fetched only what the first had not"


def _consumer(stado_env, slow, tmp_path, store, command: str, *, size: int, rate: float, **options):
    """(consumer job, its input's SHA-256, agent): a job whose input of `size` bytes (big.bin, made by a producer
    that has run) comes to an agent through the throttled link at `rate` bytes/s; the agent's STADO_CONFIG has
    `options` too."""
    proxy, slow_env = slow
    producer, sha = produce(stado_env, tmp_path, store, size)
    consumer = submit(stado_env, command, "--input", f"{producer}:big.bin")
    proxy.rate = rate
    return consumer, sha, Agent(slow_env(timeout=2, **options), tmp_path, name="consumer")


@s3_only
def test_an_input_download_that_stalls_resumes_where_it_stopped(stado_env, slow, tmp_path, store):
    proxy = slow[0]
    seen = tmp_path / "seen.txt"
    # 8 s for the whole input: time to catch it half way
    consumer, sha, agent = _consumer(stado_env, slow, tmp_path, store, f"sha256sum big.bin > {seen}", size=20 * MB,
                                     rate=2.5 * MB, stall_timeout=1.5)
    try:
        wait_for(lambda: proxy.down > 5 * MB, timeout=60, message="5 MB of the input through the proxy")
        # The download stops moving; the agent's small requests (renewals) still pass. (A renewal whose
        # response a full stall swallows is the lease protocol's matter, not the transfer's.)
        proxy.stall(bulk_over=1 * MB)
        wait_for(lambda: "fetching inputs stopped moving" in agent.log(), timeout=30, message="the stall reported")
        proxy.resume()
        wait_for(lambda: machine_status(stado_env, consumer)["terminal"], timeout=90, message="the consumer to end")
        log = agent.log()
        assert machine_status(stado_env, consumer)["state"] == "completed", log
        assert seen.read_text().split()[0] == sha
        fetched = re.search(r"inputs fetched: 20\.0 MB in [\d.]+ s \(resumed at ([\d.]+) MB\)", log)
        assert fetched and float(fetched.group(1)) >= 2, log
        assert proxy.down < 30 * MB, "resumed, not fetched again from zero"
        shown = stado(stado_env, "job", "watch", consumer).stdout
        assert "[stado] fetching inputs stopped moving" in shown and "[stado] inputs fetched" in shown
    finally:
        agent.stop()


@s3_only
def test_the_agent_renews_and_honours_sigterm_while_an_input_arrives(stado_env, slow, tmp_path, store):
    proxy = slow[0]
    seen = tmp_path / "seen.txt"
    consumer, sha, agent = _consumer(stado_env, slow, tmp_path, store, f"sha256sum big.bin > {seen}", size=12 * MB,
                                     rate=2 * MB)
    try:
        wait_for(lambda: proxy.down > 2 * MB, timeout=60, message="the input arriving")
        pulses = set()
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            try:
                pulses.add(json.loads(store.get(f"status/{consumer}/heartbeat").data)["at"])
            except Exception:  # not written yet
                pass
            time.sleep(0.05)
        assert len(pulses) >= 3, "renewals go on while the input arrives"
        agent.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: "SIGTERM: not claiming any more" in agent.log(), timeout=3, message="SIGTERM honoured")
        assert not seen.exists(), "the input was still arriving"
        assert agent.wait(90) == 0, agent.log()
        assert machine_status(stado_env, consumer)["state"] == "completed"
        assert seen.read_text().split()[0] == sha
    finally:
        agent.stop()


@s3_only
def test_a_large_artifact_uploads_through_a_slow_link_with_a_2_s_request_timeout(slow, tmp_path, store):
    proxy, slow_env = slow
    proxy.rate = 5 * MB
    env = slow_env(timeout=2)
    job = submit(env, f"head -c {30 * MB} /dev/urandom > up.bin && $STADO_BIN artifact put up.bin")
    agent = run_until_idle(env, tmp_path, timeout=180)
    assert machine_status(env, job)["state"] == "completed", agent.log()
    [entry] = json.loads(store.get(f"status/{job}/manifest.json").data)["artifacts"]
    assert entry["size"] == 30 * MB
    assert hashlib.sha256(store.get(f"status/{job}/artifacts/up.bin").data).hexdigest() == entry["sha256"]


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_job_watch_shows_a_partial_line_within_2_s(stado_env, tmp_path):
    mark = tmp_path / "written"
    job = submit(stado_env, f"printf 'fetching model.bin ... '; touch {mark}; sleep 60")
    agent = Agent(stado_env, tmp_path)
    watch = subprocess.Popen([STADO, "job", "watch", job, "--interval", "0.2"], env=stado_env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    seen = []

    def read():
        while chunk := watch.stdout.read1(4096):
            seen.append((time.time(), chunk))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(mark.exists, timeout=30, message="the partial line written")
        written = mark.stat().st_mtime
        wait_for(lambda: b"fetching model.bin ... " in b"".join(c for _, c in seen), timeout=10,
                 message="the partial line in job watch")
        shown_at = next(t for t, _ in _cumulative(seen) if b"fetching model.bin ... " in _)
        print(f"\npartial line shown by job watch {shown_at - written:.2f} s after it was written")
        assert shown_at - written < 2.0, shown_at - written
    finally:
        stado(stado_env, "cancel", job, ok=False)
        watch.wait(30)
        reader.join(10)
        watch.stdout.close()
        agent.stop()


def _cumulative(seen):
    text = b""
    for at, chunk in seen:
        text += chunk
        yield at, text


@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
def test_a_job_writing_100_mb_never_delays_its_neighbours_renewals(stado_env, tmp_path, store):
    neighbour = submit(stado_env, "sleep 120")
    agent = Agent(stado_env, tmp_path, "--slots", "2", "--poll-seconds", "1")
    try:
        wait_for(lambda: machine_status(stado_env, neighbour)["state"] == "running", timeout=30,
                 message="the neighbour running")
        noisy = submit(stado_env, "python3 -c \"import sys; w = sys.stdout.write\n"
                       "for i in range(1_250_000): w(f'step {i} loss 0.{i % 97:02d} tokens {i * 7} lr=3e-4 "
                       "https://example.com/run/{i}\\n')\nprint('THE LAST LINE: error at step 1249999')\"")
        renewals = {}
        while not _exists(store, f"completed/{noisy}.json") and not _exists(store, f"failed/{noisy}.json"):
            _look(store, neighbour, renewals)
            time.sleep(0.05)
        after = time.monotonic() + 15
        first_after = len(renewals)
        while len(renewals) < max(5, first_after + 3) and time.monotonic() < after:  # and a few renewals after it
            _look(store, neighbour, renewals)
            time.sleep(0.1)
        assert machine_status(stado_env, noisy)["state"] == "completed", agent.log()
        # A renewal is late by how long after its due time (the previous one's end + the poll) it began. The
        # agent keeps the longest lateness in its promise (lease_expires_at = began + poll + longest lateness
        # + the last write's duration), and its pulse is written as the renewal ends: the last renewal and its
        # pulse give the longest lateness of all.
        last = max(g for g, r in renewals.items() if r[2] is not None)
        began, lease, ended = renewals[last]
        latest = lease - began - 1.0 - (ended - began)
        gaps = [b[0] - a[2] - 1.0 for g, a in renewals.items() if (b := renewals.get(g + 1)) and a[2] is not None]
        print(f"\nneighbour renewals seen: {len(renewals)}; longest lateness {latest:.3f} s (the agent's), "
              f"{max(gaps, default=0):.3f} s (seen here)")
        assert len(renewals) >= 5 and latest <= 1.0, (latest, gaps)
        chunks = sorted(store.list(f"status/{noisy}/output/"), key=lambda e: keys.chunk_seq(e.key))
        kept = b"".join(store.get(e.key).data for e in chunks)
        assert len(kept) <= 64 * 1024 * 1024
        assert kept.rstrip().endswith(b"THE LAST LINE: error at step 1249999")
        assert re.match(rb"\[stado: \d+ bytes of earlier output were dropped by the 64 MiB output cap\]\n", kept)
        assert b"step 1249998 loss" in kept
    finally:
        stado(stado_env, "cancel", neighbour, ok=False)
        agent.stop()


def _exists(store, key) -> bool:
    try:
        store.get(key)
        return True
    except Exception:  # NotFound (or a moment of store trouble: looked at again)
        return False


def _look(store, job, renewals):
    """renewals[generation] = (began, lease_expires_at, ended: its pulse, once seen)."""
    from stado.core.documents import parse_iso

    try:
        doc = json.loads(store.get(f"running/{job}.json").data)
        pulse = json.loads(store.get(f"status/{job}/heartbeat").data)
    except Exception:  # between two writes, or gone
        return
    began, lease = parse_iso(doc["written_at"]), parse_iso(doc["lease_expires_at"])
    renewals.setdefault(doc["generation"], (began, lease, None))
    if pulse["generation"] in renewals and pulse["renewed"]:
        b, lease_, _ = renewals[pulse["generation"]]
        renewals[pulse["generation"]] = (b, lease_, parse_iso(pulse["at"]))


@pytest.mark.parametrize("store_target", ["file"], indirect=True)
def test_artifact_put_refuses_a_link_out_of_the_work_directory(stado_env, tmp_path, store):
    job = submit(stado_env, "ln -s /etc/passwd pw; echo mine > own.txt; ln -s own.txt inside; "
                 "$STADO_BIN artifact put pw; echo put-exit=$?; $STADO_BIN artifact put inside")
    agent = run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, job)["state"] == "completed", agent.log()
    output = stado(stado_env, "job", "watch", job).stdout
    assert "put-exit=2" in output
    [line] = [text for text in output.splitlines() if "pw:" in text]
    assert "a symbolic link to /etc/passwd, outside the job's work directory; refused" in line
    manifest = json.loads(store.get(f"status/{job}/manifest.json").data)
    assert [a["name"] for a in manifest["artifacts"]] == ["inside"]
    assert store.get(f"status/{job}/artifacts/inside").data == b"mine\n"


@pytest.mark.parametrize("store_target", ["file", "s3"], indirect=True)
def test_the_agent_uploads_only_names_results_accepts_and_reports_the_rest(stado_env, tmp_path, store):
    job = submit(stado_env, 'area=$(dirname "$WC_ARTIFACT_INPUTS_FILE"); mkdir -p "$area/artifacts"; '
                 'printf x > "$area/artifacts/ padded"; ln -s /etc/passwd "$area/artifacts/linked"; '
                 "printf ok > good.txt; $STADO_BIN artifact put good.txt")
    agent = run_until_idle(stado_env, tmp_path)
    assert machine_status(stado_env, job)["state"] == "completed", agent.log()
    manifest = json.loads(store.get(f"status/{job}/manifest.json").data)
    assert [a["name"] for a in manifest["artifacts"]] == ["good.txt"]
    assert sorted(r["name"] for r in manifest["refused"]) == [" padded", "linked"]
    out = tmp_path / "out"
    got = stado(stado_env, "results", job, str(out))
    assert (out / "good.txt").read_text() == "ok" and sorted(p.name for p in out.iterdir()) == ["good.txt"]
    assert "' padded' was not uploaded by the agent: unsafe artifact name" in got.stderr
    assert "'linked' was not uploaded by the agent" in got.stderr
    output = stado(stado_env, "job", "watch", job).stdout
    assert "[stado] artifact ' padded' not uploaded" in output and "[stado] artifact 'linked' not uploaded" in output


@s3_only
def test_a_results_transfer_that_stops_moving_is_shown_stalled_until_ctrl_c_and_then_resumes(stado_env, slow,
                                                                                            tmp_path, store):
    """No stall limit by default: the transfer stays, shown stalled with its bytes and seconds, until the user
    stops it; what arrived is kept for the next run."""
    proxy, slow_env = slow
    job, sha = produce(stado_env, tmp_path, store, 20 * MB)
    proxy.rate = 5 * MB
    env = slow_env(timeout=2)
    out = tmp_path / "out"
    master, terminal = pty.openpty()
    shown = []
    threading.Thread(target=lambda: _drain(master, shown), daemon=True).start()
    proc = subprocess.Popen([STADO, "results", job, str(out)], env=env, stdout=subprocess.DEVNULL, stderr=terminal)
    try:
        wait_for(lambda: proxy.down > 6 * MB, timeout=60, message="6 MB through the proxy")
        proxy.stall()
        text = lambda: b"".join(shown).decode(errors="replace")  # noqa: E731
        found = wait_for(lambda: re.findall(r"stalled at ([\d.]+) MB of 20\.0 MB: no bytes moved for (\d+) s", text()),
                         timeout=30, message="the stall shown")
        wait_for(lambda: any(int(s) >= 4 for _, s in re.findall(r"stalled at ([\d.]+) MB of 20\.0 MB: no bytes moved "
                                                                 r"for (\d+) s", text())),
                 timeout=30, message="four seconds of it")
        assert proc.poll() is None, "no clock ended it"
        assert float(found[0][0]) > 2 and "Ctrl-C stops it" in text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(terminal)
    _resumes(proxy, env, job, out, sha)


@s3_only
def test_an_input_fetch_that_stops_moving_is_shown_stalled_in_the_job_output_and_cancelled_by_name(stado_env, slow,
                                                                                                 tmp_path, store):
    proxy = slow[0]
    seen = tmp_path / "seen"
    consumer, _, agent = _consumer(stado_env, slow, tmp_path, store, f"echo ran > {seen}", size=12 * MB, rate=2 * MB)

    def output() -> str:
        return b"".join(store.get(e.key).data for e in store.list(keys.output_prefix(consumer))).decode()

    try:
        wait_for(lambda: proxy.down > 3 * MB, timeout=60, message="the input arriving")
        proxy.stall(bulk_over=1 * MB)  # the fetch stops moving; renewals still pass
        wait_for(lambda: re.search(r"\[stado\] fetching inputs: stalled at [\d.]+ MB of 12\.0 MB: no bytes moved for "
                                   r"([3-9]|\d\d+) s", output()), timeout=60, message="the stall in the job's output")
        assert f"`stado cancel {consumer}` stops it" in output()
        assert machine_status(stado_env, consumer)["state"] == "running"  # claimed, waiting, not given up
        assert "stopped moving" not in agent.log()
        stado(stado_env, "cancel", consumer)
        wait_for(lambda: machine_status(stado_env, consumer)["terminal"], timeout=30, message="the cancel settled")
        assert machine_status(stado_env, consumer)["state"] == "cancelled"
        assert agent.proc.poll() is None and not seen.exists()
    finally:
        proxy.resume()
        agent.stop()
