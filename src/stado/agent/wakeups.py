"""How the agent's loop sleeps and is woken: SIGTERM and SIGINT (through the wakeup fd), a slot's transfer thread
that has finished (notify), and a store that rings when a job is indexed (the local directory: ObjectStore.wake_fd),
so that an idle agent claims at once. Before install (an in-process test steps the agent itself), nothing waits.
"""
import os
import select
import signal

from runkit.system import proc

from ..queue import readyindex


class Wakeups:
    def __init__(self):
        self.read_fd: int | None = None   # the wake pipe, which signals and notify() write to
        self.write_fd: int | None = None
        self.ring_fd: int | None = None   # readable when a submit on this host rang the store (the local directory)

    def install(self, store, on_stop) -> dict:
        """The wake pipe, SIGTERM and SIGINT handled by on_stop(signum, frame), SIGCHLD and the store's ring; returns
        what restore() puts back."""
        self.read_fd, self.write_fd = proc.wake_pipe()
        old: dict = {sig: signal.signal(sig, on_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        old[signal.SIGCHLD] = signal.signal(signal.SIGCHLD, lambda *_: None)
        old["wakeup"] = signal.set_wakeup_fd(self.write_fd)
        self.ring_fd = store.wake_fd(readyindex.READY_TOPIC)
        return old

    def restore(self, old: dict) -> None:
        signal.set_wakeup_fd(old.pop("wakeup"))
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for fd in (self.read_fd, self.write_fd, self.ring_fd):
            if fd is not None:
                os.close(fd)
        self.read_fd = self.write_fd = self.ring_fd = None

    def notify(self) -> None:
        if self.write_fd is None:
            return  # not running (an in-process test steps it): nothing to wake
        try:
            os.write(self.write_fd, b"!")
        except OSError:  # full (a wake-up is pending anyway), or closed
            pass

    def wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` seconds or until woken; whether the store rang."""
        if self.read_fd is None:
            return False
        watched = [self.read_fd] if self.ring_fd is None else [self.read_fd, self.ring_fd]
        try:
            ready, _, _ = select.select(watched, [], [], timeout)
        except InterruptedError:
            return False
        for fd in ready:
            proc.drain(fd)
        return self.ring_fd in ready
