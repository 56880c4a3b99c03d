"""One attempt of a job, run by its supervisor: spawn the target in its own session with output straight
into the attempt's log file, watch it (timeout, cancel, the log cap and its `.cut` protocol), stop
whatever of its tree is left, and say how it ended: an AttemptEnd, which the owner records.

An attempt is given the supervisor's context and its lease (it sleeps in the lease's idle, which keeps the
lease renewed, and reads the job again through it when rung); it writes only what belongs to the attempt
(the target's identity, notes on its log), never the job's outcome.
"""
import os

from runkit.system import proc

from ..core import faults, home as homes
from ..core.model import JobSpec
from ..store import transitions
from .context import SupervisorContext
from .lease import Lease

GRACE_AFTER_EXIT = 2.0  # seconds a target's leftover processes get between SIGTERM and SIGKILL


class LogUnwritable(OSError):
    """The attempt's log file cannot be made (a full disk, a read-only home)."""


class AttemptEnd:
    """How an attempt ended, for the owner to record (transitions.end_attempt): the attempt's exit code or
    signal, its outcome and error, and either how long after the recorded end the next attempt may start
    (retry_in, seconds: measured from the same clock reading the owner writes as the attempt's end, so the
    record never shows a retry that began sooner than its delay) or how the job ends (job_outcome, with detail)."""

    __slots__ = ("number", "exit_code", "signal", "attempt_outcome", "error", "retry_in", "job_outcome", "detail")

    def __init__(self, number: int, exit_code: int | None, signal: int | None, attempt_outcome: str,
                 error: str | None, retry_in: float | None, job_outcome: str, detail: str | None):
        self.number, self.exit_code, self.signal = number, exit_code, signal
        self.attempt_outcome, self.error, self.retry_in = attempt_outcome, error, retry_in
        self.job_outcome, self.detail = job_outcome, detail

    @property
    def retried(self) -> bool:
        return self.retry_in is not None

    def __repr__(self) -> str:
        return f"AttemptEnd({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"


class Attempt:
    """Attempt `number` of the context's job, writing to `log_path`."""

    def __init__(self, ctx: SupervisorContext, lease: Lease, spec: JobSpec, number: int, log_path: str):
        self.ctx, self.lease, self.spec = ctx, lease, spec
        self.number, self.log_path = number, log_path
        self.target: int | None = None  # pid of the running target, until it is reaped
        self.disk_full = False
        self.unrecorded: tuple[int, int, int, str, int] | None = None  # the target's identity, while writing it waits for the database
        self.next_record = 0.0
        self.cap_sizes: dict[str, int] = {}  # each capped log's size at the last look (whether it grew)

    def run(self) -> AttemptEnd:
        """Run the attempt to its end; how it ended."""
        number, log_path, ctx = self.number, self.log_path, self.ctx
        faults.hit("supervisor:before_spawn")
        try:
            pid = self._spawn()
        except LogUnwritable as e:
            reason: str | None = f"cannot create its log file {log_path}: {e.strerror or e}"
        except OSError as e:
            reason = f"cannot start {self.spec.argv[0]!r}: {e.strerror or e}"
        else:
            reason = None
        if reason is not None:
            _append_log(log_path, f"jobman: {reason}\n")
            return AttemptEnd(number, None, None, "spawn_failed", reason, None, "failed", reason)
        self.target = pid
        faults.hit("supervisor:before_record")
        start_time, boot = ctx.processes.target_identity(pid)
        self.unrecorded = (number, pid, start_time, boot, pid)
        self._record_target()
        faults.hit("supervisor:after_spawn")
        status, stop_reason = self._watch(pid)
        self.target = None
        self._sweep()
        if self.unrecorded is not None:  # recorded late beats never: show and the events keep the pid
            ctx.db.call("record the target", self._record_target_now, pause=self.lease.pause)
        self.disk_full = self.disk_full or _filesystem_full(log_path)
        if self.disk_full:
            self._note_disk_full()
        return self._conclude(status, stop_reason)

    def _conclude(self, status: int, stop_reason: str | None) -> AttemptEnd:
        """The end that the target's exit status and the reason it was stopped (if it was) make."""
        from runkit.core.retry import is_retryable, retry_delay  # (once an attempt ends: not at each return from lean)

        number, spec = self.number, self.spec
        exit_code, sig = proc.describe_status(status)
        policy = spec.retry
        if stop_reason == "cancelled":
            return AttemptEnd(number, exit_code, sig, "cancelled", None, None, "cancelled",
                              f"cancelled during attempt {number}")
        if stop_reason == "timed_out":
            retry = is_retryable(policy, number, exit_code, sig, timed_out=True)
            return AttemptEnd(number, exit_code, sig, "timed_out", None,
                              retry_delay(policy, number) if retry else None, "timed_out",
                              f"attempt {number} exceeded its timeout of {spec.timeout}s")
        if exit_code == 0:
            return AttemptEnd(number, 0, None, "succeeded", None, None, "succeeded", None)
        retry = is_retryable(policy, number, exit_code, sig, timed_out=False)
        how = f"exit code {exit_code}" if exit_code is not None else f"signal {proc.signal_name(sig)}"
        full = "; the filesystem of its log was full, so output may be missing" if self.disk_full else ""
        return AttemptEnd(number, exit_code, sig, "failed", None, retry_delay(policy, number) if retry else None,
                          "failed", f"attempt {number} ended with {how}{full}")

    def _record_target(self) -> None:
        """Write the target's identity, or leave it for later if the database cannot take it now. Until it
        is written, the job's processes are found by the JOBMAN_JOB_ID in their environment."""
        clock = self.ctx.clock
        if self.unrecorded is None or clock.wall() < self.next_record:
            return
        ok, wait = self.ctx.db.try_once("record the target", self._record_target_now)
        if not ok:
            self.next_record = clock.wall() + wait

    def _record_target_now(self, conn) -> None:
        assert self.unrecorded is not None
        transitions.record_target(conn, self.ctx.job_id, *self.unrecorded, self.ctx.clock.wall())
        self.unrecorded = None

    def _note_disk_full(self) -> None:
        ctx = self.ctx
        ctx.log(f"attempt {self.number}: the filesystem of {self.log_path} was full while it ran; its output may "
                f"be missing")
        ctx.db.call("note the full disk", transitions.add_attempt_note, ctx.job_id, "log_disk_full", ctx.clock.wall(),
                    attempt=self.number, pause=self.lease.pause)

    def _spawn(self) -> int:
        spec, ctx = self.spec, self.ctx
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
            env = dict(spec.env)
            env["JOBMAN_JOB_ID"] = ctx.job_id
            env["JOBMAN_ATTEMPT"] = str(self.number)
            return ctx.processes.spawn(spec.executable, spec.argv, env, stdin=null, stdout=out, stderr=err,
                                       cwd=spec.cwd)
        finally:
            os.umask(old_umask)
            os.close(null)
            os.close(out)
            if err != out:
                os.close(err)

    def _watch(self, pid: int) -> tuple[int, str | None]:
        """Wait for the target to exit while enforcing timeout, cancel and the log cap."""
        clock, lease, processes = self.ctx.clock, self.lease, self.ctx.processes
        deadline = clock.wall() + self.spec.timeout if self.spec.timeout else float("inf")
        kill_after = self.spec.kill_after
        caps = self._open_caps()
        pidfd = processes.exit_fd(pid)
        if pidfd is not None:
            lease.watch(pidfd)
        stop_reason: str | None = None
        kill_at: float | None = None
        check_every, next_check = 0.05, clock.wall()
        status = None
        try:
            while status is None:
                until = min(deadline if stop_reason is None else float("inf"), kill_at or float("inf"), next_check,
                            self.next_record if self.unrecorded is not None else float("inf"))
                if pidfd is None:
                    until = min(until, clock.wall() + 0.05)
                event = lease.idle(until, pidfd)
                status = self._reap(pid)
                if status is not None:
                    break
                now = clock.wall()
                self._record_target()
                if event == "bell" and stop_reason is None and lease.refresh().cancel_requested_at is not None:
                    stop_reason, kill_at = "cancelled", now + kill_after
                    self._stop_tree(f"cancel requested: stopping the process tree of pid {pid}")
                if stop_reason is None and now >= deadline:
                    stop_reason, kill_at = "timed_out", now + kill_after
                    self._stop_tree(f"timeout: stopping the process tree of pid {pid}")
                if kill_at is not None and now >= kill_at:
                    processes.signal_tree(9)
                    kill_at = now + 1.0
                if now >= next_check:
                    self.disk_full = self.disk_full or _filesystem_full(self.log_path)
                    grew = self._enforce_caps(caps)
                    check_every = 0.02 if grew else min(check_every * 2, 0.5)
                    next_check = now + check_every
        finally:
            if pidfd is not None:
                lease.unwatch(pidfd)
                processes.close_fd(pidfd)
            self._enforce_caps(caps)
            self._record_dropped(caps)
            for cap in caps:
                cap.close()
        return status, stop_reason

    def _stop_tree(self, why: str) -> None:
        self.ctx.log(why)
        self.ctx.processes.signal_tree(15)

    def _reap(self, target: int) -> int | None:
        """Collect exited children (the target, and orphans re-parented to us); the target's status."""
        status = None
        for pid, st in self.ctx.processes.reap():
            if pid == target:
                status = st
        return status

    def _sweep(self) -> None:
        """After the target exits, no process of its tree may be left running: TERM, then KILL."""
        clock, processes = self.ctx.clock, self.ctx.processes
        if not processes.any_descendants():
            return
        self.ctx.log("the target left processes behind: stopping them")
        processes.signal_tree(15)
        give_up = clock.wall() + min(GRACE_AFTER_EXIT, self.spec.kill_after)
        while clock.wall() < give_up:
            processes.reap()
            if not processes.any_descendants():
                return
            self.lease.idle(min(give_up, clock.wall() + 0.05))
        for _ in range(50):
            if not processes.signal_tree(9):
                break
            processes.sleep(0.02)
            processes.reap()
        processes.reap()

    # --- the log cap and its .cut protocol ------------------------------------------------------------

    def _open_caps(self) -> list:
        limit = self.spec.log_limit or 0
        if limit <= 0:
            return []
        from runkit.system.logcap import LogCap

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
                grew |= size != self.cap_sizes.get(cap.path, 0)
                self.cap_sizes[cap.path] = size
                if cap.enforce():
                    _write_cut_count(cap.path, cap.dropped, cap.shift, cap.at_line_start)
            except OSError as e:
                self.ctx.log(f"log cap: {e}")
        return grew

    def _record_dropped(self, caps) -> None:
        dropped = sum(cap.dropped for cap in caps)
        if dropped:
            ctx = self.ctx
            ctx.db.call("record the dropped output", transitions.add_attempt_note, ctx.job_id, "log_truncated",
                        ctx.clock.wall(), bytes_dropped=dropped, limit=self.spec.log_limit, pause=self.lease.pause)


def _append_log(path: str, text: str) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(path, "a") as f:
            f.write(text)
    except OSError:
        pass


def _write_cut_count(log_path: str, dropped: int, shift: int, at_line_start: bool) -> None:
    """Tell readers how many bytes the cap has cut from the front so far, how far the file's offsets
    lag the output's, and whether the first kept byte begins a line (see runkit.system.logcap)."""
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

