"""What happened in a run, step by step: each store request (actor, request, key, result, and in verbose
runs the library functions it came from) and each event (a process started or stopped, a crash, a stall,
a clock jump, an acknowledged cancel, an agent's log line). Printed only when a run fails."""
import re
import sys

# The simulated ids (world.Sim.new_job_id / new_agent_id) and where they show up.
_ID = re.compile(r"00000000-0000-7000-[0-9a-f]{4}-[0-9a-f]{12}")
_STADO = ("/stado/",)
_SKIP = frozenset({"_begin", "_guard", "_body", "verb"})


def _via(depth: int = 3) -> str:
    """The stado functions on the stack of the request being made, outermost first."""
    names, frame = [], sys._getframe(depth)
    while frame is not None and len(names) < 4:
        code = frame.f_code
        if "/stado/" in code.co_filename and code.co_name not in _SKIP:
            names.append(code.co_name)
        frame = frame.f_back
    return ">".join(reversed(names))


class Trace:
    def __init__(self, sim):
        self.sim = sim
        self.rows: list[tuple] = []

    def request(self, actor, verb: str, key: str, result: str) -> None:
        sim = self.sim
        if sim.verbose:  # exploring runs keep no trace: a failing seed is replayed verbosely to print one
            self.rows.append((sim.steps, sim.now, actor.name, verb, key, result, _via()))

    def event(self, actor, text: str) -> None:
        sim = self.sim
        if sim.verbose:
            self.rows.append((sim.steps, sim.now, actor.name if actor is not None else "sim", None, None, text, ""))

    def short(self, text: str) -> str:
        names = self.sim.names
        return _ID.sub(lambda m: names.get(m.group(0), m.group(0)), text)

    def lines(self, only_job: str | None = None) -> list[str]:
        """The trace as text, one row a line, up to the last violation. With only_job, requests on other
        jobs' keys are left out."""
        from .world import EPOCH

        rows = self.rows
        last = max((i for i, row in enumerate(rows) if row[3] is None and row[5].startswith("VIOLATION")), default=None)
        if last is not None:
            rows = rows[:last + 1]
        out = [f"{'step':>5} {'t (s)':>8}  {'actor':<10} {'request':<14} {'key':<24} result"]
        for i, (step, t, actor, verb, key, result, via) in enumerate(rows):
            if only_job and key is not None and not self._about(rows, i, only_job):
                continue
            if verb is None:
                out.append(f"{'':>5} {t - EPOCH:8.3f}  {actor:<10} * {self.short(result)}")
            else:
                tail = f"  [{via}]" if via else ""
                out.append(f"{step:>5} {t - EPOCH:8.3f}  {actor:<10} {verb:<14} {self.short(key):<24} "
                           f"{self.short(result)}{tail}")
        return out

    @staticmethod
    def _about(rows, i: int, job: str) -> bool:
        """Whether request row i concerns the job: its key names it, or it is a listing after which the
        same actor's next request does."""
        _, _, actor, verb, key, _, _ = rows[i]
        if job in key:
            return True
        if verb != "list":
            return False
        for row in rows[i + 1:]:
            if row[2] == actor and row[3] is not None:
                return job in row[4]
        return False
