"""One attempt of a job, run by its supervisor: spawn the target in its own session with output straight
into the attempt's log file, watch it (timeout, cancel, the log cap and its `.cut` protocol), stop
whatever of its tree is left, and record how it ended.
"""
import os
import select
import time

from runkit import proc
from runkit.retry import is_retryable, retry_delay

from . import faults, home as homes
from .errors import Conflict
from .store import transitions

GRACE_AFTER_EXIT = 2.0  # seconds a target's leftover processes get between SIGTERM and SIGKILL


class LogUnwritable(OSError):
    """The attempt's log file cannot be made (a full disk, a read-only home)."""


class Attempt:
    """Attempt `number` of the job owned by `sup` (an eligibility.Supervisor, whose lease it keeps
    renewing while it waits), writing to `log_path`."""

    def __init__(self, sup, number: int, log_path: str):
        self.sup, self.number, self.log_path = sup, number, log_path
        self.spec = sup.spec
        self.disk_full = False
        self.unrecorded = None  # the target's identity, while writing it waits for the database
        self.next_record = 0.0

    def run(self) -> bool:
        """Run the attempt to its end. Returns True when the job is finished."""
        number, log_path, sup = self.number, self.log_path, self.sup
        faults.hit("supervisor:before_spawn")
        try:
            pid = self._spawn()
        except LogUnwritable as e:
            reason = f"cannot create its log file {log_path}: {e.strerror or e}"
        except OSError as e:
            reason = f"cannot start {self.spec.argv[0]!r}: {e.strerror or e}"
        else:
            reason = None
        if reason is not None:
            _append_log(log_path, f"jobman: {reason}\n")
            self._end(None, None, "spawn_failed", reason, None, "failed", reason)
            return True
        sup.target = pid
        faults.hit("supervisor:before_record")
        st = proc.stat(pid)
        self.unrecorded = (number, pid, st.start_time if st else 0, proc.boot_id(), pid)
        self._record_target()
        faults.hit("supervisor:after_spawn")
        status, stop_reason = self._watch(pid)
        sup.target = None
        self._sweep()
        if self.unrecorded is not None:  # recorded late beats never: show and the events keep the pid
            sup.db.call("record the target", self._record_target_now, pause=sup.pause)
        now = time.time()
        self.disk_full = self.disk_full or _filesystem_full(log_path)
        if self.disk_full:
            self._note_disk_full()
        return self._conclude(status, stop_reason, now)

    def _conclude(self, status: int, stop_reason: str | None, now: float) -> bool:
        """Record the end that the target's exit status and the reason it was stopped (if it was) make."""
        number, spec = self.number, self.spec
        exit_code, sig = proc.describe_status(status)
        policy = spec.retry
        if stop_reason == "cancelled":
            return self._end(exit_code, sig, "cancelled", None, None, "cancelled",
                             f"cancelled during attempt {number}")
        if stop_reason == "timed_out":
            retry = is_retryable(policy, number, exit_code, sig, timed_out=True)
            return self._end(exit_code, sig, "timed_out", None,
                             now + retry_delay(policy, number) if retry else None, "timed_out",
                             f"attempt {number} exceeded its timeout of {spec.timeout}s")
        if exit_code == 0:
            return self._end(0, None, "succeeded", None, None, "succeeded", None)
        retry = is_retryable(policy, number, exit_code, sig, timed_out=False)
        how = f"exit code {exit_code}" if exit_code is not None else f"signal {proc.signal_name(sig)}"
        full = "; the filesystem of its log was full, so output may be missing" if self.disk_full else ""
        return self._end(exit_code, sig, "failed", None, now + retry_delay(policy, number) if retry else None,
                         "failed", f"attempt {number} ended with {how}{full}")

    def _record_target(self) -> None:
        """Write the target's identity, or leave it for later if the database cannot take it now. Until it
        is written, the job's processes are found by the JOBMAN_JOB_ID in their environment."""
        if self.unrecorded is None or time.time() < self.next_record:
            return
        ok, wait = self.sup.db.try_once("record the target", self._record_target_now)
        if not ok:
            self.next_record = time.time() + wait

    def _record_target_now(self, conn) -> None:
        transitions.record_target(conn, self.sup.job_id, *self.unrecorded, time.time())
        self.unrecorded = None

    def _note_disk_full(self) -> None:
        sup = self.sup
        sup.log(f"attempt {self.number}: the filesystem of {self.log_path} was full while it ran; its output may "
                f"be missing")
        sup.db.call("note the full disk", transitions.add_attempt_note, sup.job_id, "log_disk_full", time.time(),
                    attempt=self.number, pause=sup.pause)

    def _spawn(self) -> int:
        spec, sup = self.spec, self.sup
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        try:
            os.makedirs(os.path.dirname(self.log_path), mode=0o700, exist_ok=True)
            out = os.open(self.log_path, flags, 0o600)
        except OSError as e:
            raise LogUnwritable(e.errno, e.strerror) from None
        err = out
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        old_umask = os.umask(spec.umask)
        try:
            if spec.separate_stderr:
                try:
                    err = os.open(homes.stderr_log_path(self.log_path), flags, 0o600)
                except OSError as e:
                    raise LogUnwritable(e.errno, e.strerror) from None
            if not sup.subreaper:
                sup.subreaper = proc.become_subreaper()
            env = dict(spec.env)
            env["JOBMAN_JOB_ID"] = sup.job_id
            env["JOBMAN_ATTEMPT"] = str(self.number)
            return proc.spawn(spec.executable, spec.argv, env, stdin=null, stdout=out, stderr=err, cwd=spec.cwd,
                              only_std_fds=True)
        finally:
            os.umask(old_umask)
            os.close(null)
            os.close(out)
            if err != out:
                os.close(err)

    def _watch(self, pid: int) -> tuple[int, str | None]:
        """Wait for the target to exit while enforcing timeout, cancel and the log cap."""
        sup = self.sup
        deadline = time.time() + self.spec.timeout if self.spec.timeout else float("inf")
        kill_after = self.spec.kill_after
        caps = self._open_caps()
        pidfd = _pidfd(pid)
        if pidfd is not None:
            sup.poller.register(pidfd, select.POLLIN)
        stop_reason, kill_at, check_every, next_check = None, None, 0.05, time.time()
        status = None
        try:
            while status is None:
                until = min(deadline if stop_reason is None else float("inf"), kill_at or float("inf"), next_check,
                            self.next_record if self.unrecorded is not None else float("inf"))
                if pidfd is None:
                    until = min(until, time.time() + 0.05)
                event = sup.idle(until, pidfd)
                status = _reap(pid)
                if status is not None:
                    break
                now = time.time()
                self._record_target()
                if event == "bell" and stop_reason is None and sup.refresh().cancel_requested_at is not None:
                    stop_reason, kill_at = "cancelled", now + kill_after
                    self._stop_tree(f"cancel requested: stopping the process tree of pid {pid}")
                if stop_reason is None and now >= deadline:
                    stop_reason, kill_at = "timed_out", now + kill_after
                    self._stop_tree(f"timeout: stopping the process tree of pid {pid}")
                if kill_at is not None and now >= kill_at:
                    proc.signal_tree(os.getpid(), 9)
                    kill_at = now + 1.0
                if now >= next_check:
                    self.disk_full = self.disk_full or _filesystem_full(self.log_path)
                    grew = self._enforce_caps(caps)
                    check_every = 0.02 if grew else min(check_every * 2, 0.5)
                    next_check = now + check_every
        finally:
            if pidfd is not None:
                sup.poller.unregister(pidfd)
                os.close(pidfd)
            self._enforce_caps(caps)
            self._record_dropped(caps)
            for cap in caps:
                cap.close()
        return status, stop_reason

    def _stop_tree(self, why: str) -> None:
        self.sup.log(why)
        proc.signal_tree(os.getpid(), 15)

    def _sweep(self) -> None:
        """After the target exits, no process of its tree may be left running: TERM, then KILL."""
        me = os.getpid()
        if not proc.live_descendants(me):
            return
        self.sup.log("the target left processes behind: stopping them")
        proc.signal_tree(me, 15)
        give_up = time.time() + min(GRACE_AFTER_EXIT, self.spec.kill_after)
        while time.time() < give_up:
            proc.reap_children()
            if not proc.live_descendants(me):
                return
            self.sup.idle(min(give_up, time.time() + 0.05))
        for _ in range(50):
            if not proc.signal_tree(me, 9):
                break
            time.sleep(0.02)
            proc.reap_children()
        proc.reap_children()

    # --- the log cap and its .cut protocol ------------------------------------------------------------

    def _open_caps(self) -> list:
        limit = self.spec.log_limit or 0
        if limit <= 0:
            return []
        from runkit.logcap import LogCap

        paths = [self.log_path]
        if self.spec.separate_stderr:
            paths.append(homes.stderr_log_path(self.log_path))
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
                    _write_cut_count(cap.path, cap.dropped, cap.shift, cap.at_line_start)
            except OSError as e:
                self.sup.log(f"log cap: {e}")
        return grew

    def _record_dropped(self, caps) -> None:
        dropped = sum(cap.dropped for cap in caps)
        if dropped:
            sup = self.sup
            sup.db.call("record the dropped output", transitions.add_attempt_note, sup.job_id, "log_truncated",
                        time.time(), bytes_dropped=dropped, limit=self.spec.log_limit, pause=sup.pause)

    def _end(self, exit_code, sig, attempt_outcome, error, retry_at, job_outcome, detail) -> bool:
        sup, number = self.sup, self.number
        now = time.time()
        sup.record_waits()
        while True:
            try:
                sup.rev = sup.db.call(
                    "record the attempt's end", transitions.end_attempt, sup.job_id, sup.rev, number, now=now,
                    exit_code=exit_code, signal=sig, attempt_outcome=attempt_outcome, error=error, retry_at=retry_at,
                    job_outcome=None if retry_at is not None else job_outcome, detail=detail, pause=sup.pause)
                break
            except Conflict:
                sup.refresh()
        sup.record_waits()
        if retry_at is not None:
            sup.log(f"attempt {number} {attempt_outcome}; retry scheduled")
            sup.wake_slot_waiters()
            return False
        sup.log(f"job finished {job_outcome}" + (f": {detail}" if detail else ""))
        faults.hit("supervisor:before_wake")  # the outcome is committed; nobody has been rung
        sup.wake_after_finish()
        return True


def _reap(target: int) -> int | None:
    """Collect exited children (the target, and orphans re-parented to us); the target's status."""
    status = None
    for pid, st in proc.reap_children():
        if pid == target:
            status = st
    return status


def _append_log(path: str, text: str) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a") as f:
            f.write(text)
    except OSError:
        pass


def _write_cut_count(log_path: str, dropped: int, shift: int, at_line_start: bool) -> None:
    """Tell readers how many bytes the cap has cut from the front so far, how far the file's offsets
    lag the output's, and whether the first kept byte begins a line (see runkit.logcap)."""
    cut = homes.cut_path(log_path)
    tmp = f"{cut}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # private, as the log is
    try:
        os.write(fd, f"{dropped} {shift} {int(at_line_start)}".encode())
    finally:
        os.close(fd)
    os.replace(tmp, cut)


def _filesystem_full(path: str) -> bool:
    """Whether the filesystem holding `path` has no room left for this user (checked as the target runs)."""
    try:
        st = os.statvfs(os.path.dirname(path))
    except OSError:
        return False
    return (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize < 4096


def _pidfd(pid: int) -> int | None:
    return proc.exit_fd(pid)
