"""A watcher of the soak jobs' deaths, run as a process of its own beside a stado phase:

    python bench/soak_deaths.py LEDGER OUT

It follows LEDGER (the lines job.sh appends, soak_common), opens a pidfd on the process of every run that starts,
and appends `G <pid> <unix time>` to OUT as soon as that process has ended, however it ended. A run killed by
SIGKILL (by its keeper, which may have no time left for a SIGTERM, or by an agent) writes no end of its own; this
time is then its end: an upper bound, late by this process's wake-up at most (it sleeps in poll(2) on the pidfds,
apart from the soak's busy process). A pid gone before it was watched is written with the time it was found gone
(`G <pid> <time> unwatched`). It exits when its stdin closes.
"""
import os
import select
import sys
import time


def main(ledger: str, out_path: str) -> int:
    poller = select.poll()
    poller.register(sys.stdin.fileno(), select.POLLIN | select.POLLHUP)
    watched: dict[int, int] = {}   # pidfd -> pid
    offset, partial = 0, b""
    with open(out_path, "a", buffering=1) as out:
        while True:
            try:
                with open(ledger, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            offset += len(data)
            lines = (partial + data).split(b"\n")
            partial = lines.pop()
            for line in lines:
                parts = line.split()
                if len(parts) == 7 and parts[0] == b"S":
                    pid = int(parts[3])
                    try:
                        fd = os.pidfd_open(pid)
                    except ProcessLookupError:
                        out.write(f"G {pid} {time.time():.6f} unwatched\n")
                        continue
                    watched[fd] = pid
                    poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll(20):
                if fd == sys.stdin.fileno():
                    if not os.read(fd, 4096):
                        return 0
                    continue
                pid = watched.pop(fd, None)
                if pid is None:
                    continue
                out.write(f"G {pid} {time.time():.6f}\n")
                poller.unregister(fd)
                os.close(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
