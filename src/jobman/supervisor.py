"""The detached supervisor: `jobman __supervise JOB_ID`, one per job, in its own session.

It reads the launch credential on stdin, claims the job (seed 000), writes one acknowledgement on
stdout, and from then on owns the job: it renews its lease, decides eligibility (dependencies,
not-before, retry delay, concurrency slot), runs each attempt in its own session with output
straight into a per-attempt log file, enforces the timeout and the log cap, stops the whole tree
on timeout or cancel, and records how each attempt and the job ended.
"""
import os
import select
import sys
import time

from runkit import proc
from runkit.durations import format_time
from runkit.hashing import sha256
from runkit.ids import is_uuid, uuid7
from runkit.jsonfast import loads
from runkit.retry import is_retryable, retry_delay

from . import db, doorbell, faults, home as homes, queries, reconcile, scheduling, transitions
from .errors import Conflict

CREDENTIAL_BYTES = 32
EXIT_REFUSED = 3
GRACE_AFTER_EXIT = 2.0  # seconds a target's leftover processes get between SIGTERM and SIGKILL


class Fenced(Exception):
    """This supervisor no longer owns the job (finished by someone else, or another owner)."""


def main(args: list[str]) -> int:
    if len(args) != 1 or not is_uuid(args[0]):
        sys.stderr.write("jobman __supervise: private command; it takes exactly one job id and nothing else\n")
        return 2
    job_id = args[0]
    credential = _read_credential()
    if len(credential) != CREDENTIAL_BYTES:
        sys.stderr.write("jobman __supervise: refused: no launch credential on stdin\n")
        return EXIT_REFUSED
    home = homes.home_dir()
    path = homes.db_path(home)
    if not os.path.exists(path):
        sys.stderr.write(f"jobman __supervise: refused: no jobman database at {path}\n")
        return EXIT_REFUSED
    conn = db.connect(path, create=False)
    trace = os.environ.get("JOBMAN_TEST_QUERY_LOG")
    if trace:  # the tests count what an idle supervisor asks of the database
        log = open(trace, "a", buffering=1)
        conn.set_trace_callback(lambda sql: log.write(f"{time.time():.3f} {' '.join(sql.split())[:80]}\n"))
    supervisor_id = uuid7()
    me = proc.self_identity()
    faults.hit("supervisor:before_claim")
    if faults.active("supervisor:late_claim"):
        _sleep_past_deadline(conn, job_id)
    try:
        state = transitions.claim(conn, job_id, sha256(credential), supervisor_id, me.pid,
                                  me.start_time, me.boot_id, time.time())
    except transitions.ClaimRefused as e:
        sys.stderr.write(f"jobman __supervise: refused: {e}\n")
        return EXIT_REFUSED
    del credential
    faults.hit("supervisor:after_claim")
    _acknowledge(job_id, supervisor_id)
    _detach(home, job_id)
    return Supervisor(conn, home, job_id, supervisor_id, state).run()


def _read_credential() -> bytes:
    data = b""
    while len(data) < CREDENTIAL_BYTES + 1:
        try:
            chunk = os.read(0, CREDENTIAL_BYTES + 1 - len(data))
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


def _sleep_past_deadline(conn, job_id: str) -> None:
    row = conn.execute("SELECT claim_deadline FROM job_state WHERE job_id = ?", (job_id,)).fetchone()
    if row and row[0]:
        time.sleep(max(0.0, row[0] - time.time()) + 0.05)


def _acknowledge(job_id: str, supervisor_id: str) -> None:
    from .ack import encode as encode_ack

    data = encode_ack(job_id, supervisor_id)
    if faults.active("supervisor:bad_ack"):
        data = data.replace(b"}", b',"extra":true}')
    elif faults.active("supervisor:big_ack"):
        data = b"{" + b" " * 200_000 + b"}"
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
    except OSError:
        pass  # the CLI is gone or stopped reading: ownership is committed, so the job goes on


def _detach(home: str, job_id: str) -> None:
    """Close the launch pipes and send our own stderr to the job's supervisor log."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    log_dir = homes.job_log_dir(home, job_id)
    os.makedirs(log_dir, mode=0o700, exist_ok=True)
    log = os.open(homes.supervisor_log_path(home, job_id), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.close(log)
    os.chdir("/")


def _log(message: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
    try:
        os.write(2, f"{stamp} {message}\n".encode(errors="replace"))
    except OSError:
        pass


class Supervisor:
    def __init__(self, conn, home: str, job_id: str, supervisor_id: str, state):
        self.conn, self.home, self.job_id, self.supervisor_id = conn, home, job_id, supervisor_id
        self.rev = state["revision"]
        self.lease = state["lease_duration"]
        self.renew_every = state["renew_interval"]
        self.poll_every = state["poll_interval"]
        self.group = state["group_name"]
        self.next_renew = time.time() + self.renew_every
        self.next_reconcile = 0.0
        self.dirty = False
        self.waiting = None  # (waiting_for, detail, until) last written
        self.subreaper = False
        self.spec = None

    # --- ownership ------------------------------------------------------------------------------

    def run(self) -> int:
        _log(f"supervisor {self.supervisor_id} (pid {os.getpid()}) owns job {self.job_id}")
        self.bell = doorbell.Doorbell(self.home, self.job_id)
        self.poller = select.poll()
        self.poller.register(self.bell.fd, select.POLLIN)
        try:
            try:
                self.spec = loads(queries.spec_json(self.conn, self.job_id))
                self.spec["argv"], self.spec["env"]  # noqa: B018  (a corrupt spec fails here, not mid-run)
            except (ValueError, KeyError, TypeError) as e:
                self._finish("failed", f"the stored job specification is unreadable: {e}")
                return 1
            self._loop()
            return 0
        except Fenced as e:
            _log(f"no longer the owner of the job ({e}); exiting without touching it")
            return 0
        except Exception:
            import traceback

            _log("supervisor error:\n" + traceback.format_exc())
            return 1
        finally:
            self.bell.close()

    def _refresh(self):
        state = transitions.load_state(self.conn, self.job_id)
        self._check_owner(state)
        self.rev = state["revision"]
        return state

    def _check_owner(self, state) -> None:
        if state is None:
            raise Fenced("the job record is gone")
        if state["supervisor_id"] != self.supervisor_id:
            raise Fenced(f"owned by supervisor {state['supervisor_id']}")
        if state["phase"] == "finished":
            raise Fenced(f"finished {state['outcome']} by another process")

    def _renew(self, now: float) -> None:
        while True:
            try:
                self.rev = transitions.renew_lease(self.conn, self.job_id, self.supervisor_id, self.rev,
                                                   now + self.lease)
                break
            except Conflict:
                self._refresh()
                self.dirty = True  # something else changed the job (a cancel request, ...): look again
        late = now - self.next_renew
        if late > self.renew_every:
            _log(f"lease renewed {late:.1f}s late")
        self.next_renew = now + self.renew_every

    def _idle(self, until: float, pidfd: int | None = None) -> str:
        """Sleep until `until`, a doorbell ring or the target's exit, renewing the lease on time.
        Returns "bell", "exit" or "time"."""
        while True:
            now = time.time()
            if now >= self.next_renew:
                self._renew(now)
            if self.dirty:
                self.dirty = False
                return "bell"
            end = min(until, self.next_renew)
            timeout_ms = max(0, int((end - now) * 1000) + 1)
            for fd, _ in self.poller.poll(timeout_ms):
                if fd == pidfd:
                    return "exit"
                if fd == self.bell.fd:
                    self.bell.drain()
                    return "bell"
            if time.time() >= until:
                return "time"

    # --- waiting until eligible ---------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            now = time.time()
            snap = queries.snapshot(self.conn, self.job_id, now)
            self._check_owner(snap)
            self.rev = snap["revision"]
            if (snap["deps_stale"] or snap["slots_stale"]) and now >= self.next_reconcile:
                # Something we wait on looks abandoned and nobody may be running commands: settle it.
                self.next_reconcile = now + self.renew_every
                if reconcile.run(self.conn, self.home, now):
                    continue
            if snap["cancel_requested_at"] is not None:
                self._finish("cancelled", "cancelled before it ran" if snap["attempts"] == 0
                             else f"cancelled while waiting for attempt {snap['attempts'] + 1}")
                return
            verdict, detail = scheduling.dependency_verdict(loads(snap["deps"]))
            if verdict == "impossible":
                self._finish("dependency_failed", detail)
                return
            if verdict == "wait":
                self._wait("dependencies", detail, None, now)
                continue
            retry_at = snap["wait_until"] if snap["waiting_for"] == "retry" else None
            gate, until = scheduling.time_verdict(self.spec.get("not_before"), retry_at, now)
            if gate != "ready":
                label = "not before" if gate == "not_before" else "retry delay until"
                self._wait(gate, f"{label} {format_time(until)}",
                           until, now, keep_detail=gate == "retry")
                continue
            number = snap["attempts"] + 1
            if scheduling.slot_verdict(snap["slot_limit"] or 0, snap["slots_held"], snap["slots_ahead"]):
                log_path = homes.attempt_log_path(self.home, self.job_id, number)
                try:
                    rev = transitions.try_begin_attempt(self.conn, self.job_id, self.rev, number, log_path, now)
                except Conflict:
                    continue
                if rev is not None:
                    self.rev = rev
                    self.waiting = None
                    if self._run_attempt(number, log_path):
                        return
                    continue
            limit = snap["slot_limit"] or 0
            detail = (f"group {self.group} is paused (limit 0)" if limit == 0 else
                      f"group {self.group} is full ({snap['slots_held']}/{limit} running"
                      + (f", {snap['slots_ahead']} ahead in line)" if snap["slots_ahead"] else ")"))
            self._wait("slot", detail, None, now)

    def _wait(self, waiting_for: str, detail: str, until: float | None, now: float, keep_detail=False) -> None:
        """Record why the job waits (if that changed), then sleep until something may have changed."""
        current = (waiting_for, detail, until)
        if current != self.waiting:
            state = transitions.load_state(self.conn, self.job_id)
            self._check_owner(state)
            if keep_detail and state["waiting_for"] == waiting_for:
                current = self.waiting = (waiting_for, state["wait_detail"], until)
            else:
                try:
                    self.rev = transitions.set_waiting(self.conn, self.job_id, state["revision"], waiting_for,
                                                       detail, until, now,
                                                       announce=state["waiting_for"] != waiting_for)
                except Conflict:
                    return
                self.waiting = current
                if waiting_for == "slot":
                    self._wake_slot_waiters()  # a higher-priority job in line may now be able to start
        wake = now + self.poll_every
        if until is not None:
            wake = min(wake, until)
        self._idle(wake)

    def _finish(self, outcome: str, detail: str) -> None:
        try:
            transitions.finish(self.conn, self.job_id, self.rev, outcome, time.time(), detail)
        except Conflict:
            self._refresh()
            transitions.finish(self.conn, self.job_id, self.rev, outcome, time.time(), detail)
        _log(f"job finished {outcome}: {detail}")
        self._wake_after_finish()

    def _wake_after_finish(self) -> None:
        doorbell.ring_all(self.home, queries.dependents_to_wake(self.conn, self.job_id))
        self._wake_slot_waiters()

    def _wake_slot_waiters(self) -> None:
        free = queries.free_slots(self.conn, self.group)
        if free:
            doorbell.ring_all(self.home, queries.slot_waiters(self.conn, self.group, free))

    # --- running an attempt -------------------------------------------------------------------------

    def _run_attempt(self, number: int, log_path: str) -> bool:
        """Run attempt `number` to its end. Returns True when the job is finished."""
        spec = self.spec
        try:
            pid = self._spawn(number, log_path)
        except OSError as e:
            reason = f"cannot start {spec['argv'][0]!r}: {e.strerror or e}"
            self._append_log(log_path, f"jobman: {reason}\n")
            self._end_attempt(number, None, None, "spawn_failed", reason, None, "failed", reason)
            return True
        st = proc.stat(pid)
        transitions.record_target(self.conn, self.job_id, number, pid, st.start_time if st else 0,
                                  proc.boot_id(), pid, time.time())
        faults.hit("supervisor:after_spawn")
        status, stop_reason = self._watch(pid, log_path)
        self._sweep()
        exit_code, sig = proc.describe_status(status)
        policy = spec["retry"]
        now = time.time()
        if stop_reason == "cancelled":
            return self._end_attempt(number, exit_code, sig, "cancelled", None, None, "cancelled",
                                     f"cancelled during attempt {number}")
        if stop_reason == "timed_out":
            retry = is_retryable(policy, number, exit_code, sig, timed_out=True)
            return self._end_attempt(number, exit_code, sig, "timed_out", None,
                                     now + retry_delay(policy, number) if retry else None, "timed_out",
                                     f"attempt {number} exceeded its timeout of {spec['timeout']}s")
        if exit_code == 0:
            return self._end_attempt(number, 0, None, "succeeded", None, None, "succeeded", None)
        retry = is_retryable(policy, number, exit_code, sig, timed_out=False)
        how = f"exit code {exit_code}" if exit_code is not None else f"signal {proc.signal_name(sig)}"
        return self._end_attempt(number, exit_code, sig, "failed", None,
                                 now + retry_delay(policy, number) if retry else None, "failed",
                                 f"attempt {number} ended with {how}")

    def _spawn(self, number: int, log_path: str) -> int:
        spec = self.spec
        os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        out = os.open(log_path, flags, 0o600)
        err = out
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        old_umask = os.umask(spec.get("umask", 0o022))
        try:
            if spec["log"].get("separate_stderr"):
                err = os.open(homes.attempt_log_path(self.home, self.job_id, number, "stderr"), flags, 0o600)
            if not self.subreaper:
                self.subreaper = proc.become_subreaper()
            env = dict(spec["env"])
            env["JOBMAN_JOB_ID"] = self.job_id
            env["JOBMAN_ATTEMPT"] = str(number)
            return proc.spawn(spec["executable"], spec["argv"], env, stdin=null, stdout=out, stderr=err,
                              cwd=spec["cwd"])
        finally:
            os.umask(old_umask)
            os.close(null)
            os.close(out)
            if err != out:
                os.close(err)

    def _watch(self, pid: int, log_path: str) -> tuple[int, str | None]:
        """Wait for the target to exit while enforcing timeout, cancel and the log cap."""
        spec = self.spec
        started = time.time()
        deadline = started + spec["timeout"] if spec.get("timeout") else float("inf")
        kill_after = spec.get("kill_after", 10.0)
        caps = self._open_caps(log_path)
        pidfd = _pidfd(pid)
        if pidfd is not None:
            self.poller.register(pidfd, select.POLLIN)
        stop_reason, kill_at, check_every, next_check = None, None, 0.05, time.time()
        status = None
        try:
            while status is None:
                until = min(deadline if stop_reason is None else float("inf"), kill_at or float("inf"), next_check)
                if pidfd is None:
                    until = min(until, time.time() + 0.05)
                event = self._idle(until, pidfd)
                status = self._reap(pid)
                if status is not None:
                    break
                now = time.time()
                if event == "bell" and stop_reason is None:
                    state = self._refresh()
                    if state["cancel_requested_at"] is not None:
                        stop_reason, kill_at = "cancelled", now + kill_after
                        _log(f"cancel requested: stopping the process tree of pid {pid}")
                        proc.signal_tree(os.getpid(), 15)
                if stop_reason is None and now >= deadline:
                    stop_reason, kill_at = "timed_out", now + kill_after
                    _log(f"timeout: stopping the process tree of pid {pid}")
                    proc.signal_tree(os.getpid(), 15)
                if kill_at is not None and now >= kill_at:
                    proc.signal_tree(os.getpid(), 9)
                    kill_at = now + 1.0
                if now >= next_check:
                    grew = self._enforce_caps(caps)
                    check_every = 0.02 if grew else min(check_every * 2, 0.5)
                    next_check = now + check_every
        finally:
            if pidfd is not None:
                self.poller.unregister(pidfd)
                os.close(pidfd)
            self._enforce_caps(caps)
            self._record_dropped(caps)
            for cap in caps:
                cap.close()
        return status, stop_reason

    def _reap(self, target: int) -> int | None:
        """Collect exited children (the target, and orphans re-parented to us); the target's status."""
        status = None
        for pid, st in proc.reap_children():
            if pid == target:
                status = st
        return status

    def _sweep(self) -> None:
        """After the target exits, no process of its tree may be left running: TERM, then KILL."""
        me = os.getpid()
        if not proc.live_descendants(me):
            return
        _log("the target left processes behind: stopping them")
        proc.signal_tree(me, 15)
        give_up = time.time() + min(GRACE_AFTER_EXIT, self.spec.get("kill_after", 10.0))
        while time.time() < give_up:
            proc.reap_children()
            if not proc.live_descendants(me):
                return
            self._idle(min(give_up, time.time() + 0.05))
        for _ in range(50):
            if not proc.signal_tree(me, 9):
                break
            time.sleep(0.02)
            proc.reap_children()
        proc.reap_children()

    def _open_caps(self, log_path: str) -> list:
        limit = self.spec["log"].get("limit") or 0
        if limit <= 0:
            return []
        from runkit.logcap import LogCap

        paths = [log_path]
        if self.spec["log"].get("separate_stderr"):
            paths.append(log_path[:-4] + ".stderr.log")
        caps = []
        for path in paths:
            try:
                caps.append(LogCap(path, limit))
            except OSError:
                pass
        return caps

    def _enforce_caps(self, caps) -> bool:
        grew = False
        for cap in caps:
            try:
                size = cap.size()
                grew |= size != getattr(cap, "last_size", 0)
                cap.last_size = size
                if cap.enforce():
                    _write_cut_count(cap.path, cap.dropped, cap.shift)
            except OSError as e:
                _log(f"log cap: {e}")
        return grew

    def _record_dropped(self, caps) -> None:
        dropped = sum(cap.dropped for cap in caps)
        if dropped:
            transitions.add_attempt_note(self.conn, self.job_id, "log_truncated", time.time(), bytes_dropped=dropped,
                                         limit=self.spec["log"]["limit"])

    def _append_log(self, path: str, text: str) -> None:
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(path, "a") as f:
                f.write(text)
        except OSError:
            pass

    def _end_attempt(self, number, exit_code, sig, attempt_outcome, error, retry_at, job_outcome, detail) -> bool:
        now = time.time()
        while True:
            try:
                self.rev = transitions.end_attempt(
                    self.conn, self.job_id, self.rev, number, now=now, exit_code=exit_code, signal=sig,
                    attempt_outcome=attempt_outcome, error=error, retry_at=retry_at,
                    job_outcome=None if retry_at is not None else job_outcome, detail=detail)
                break
            except Conflict:
                self._refresh()
        if retry_at is not None:
            _log(f"attempt {number} {attempt_outcome}; retry scheduled")
            self._wake_slot_waiters()
            return False
        _log(f"job finished {job_outcome}" + (f": {detail}" if detail else ""))
        self._wake_after_finish()
        return True


def _write_cut_count(log_path: str, dropped: int, shift: int) -> None:
    """Tell readers how many bytes the cap has cut from the front so far, and how far the file's offsets
    lag the output's (see runkit.logcap)."""
    tmp = f"{log_path}.cut.tmp"
    with open(tmp, "w") as f:
        f.write(f"{dropped} {shift}")
    os.replace(tmp, f"{log_path}.cut")


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
