"""The stado SeaweedFS phase's fault regimes: tests/stado/faultproxy.py between SeaweedFS and every client of the
phase (its agents, and the `stado submit`, `cancel` and `status` commands the soak runs), rules set by `--faults`:

- `5`, `20`: that percentage of writes (create, cas, put, conditional and plain deletes) commit and then lose their
  answer (a 503 SlowDown, a 500, a reset connection or a garbled answer), that percentage of reads (get, head,
  list) fail before they reach the server, and 2% of all requests have their answer held back 0.5-3 s (so answers
  come back in another order than their requests);
- `burst`: the `5` regime, plus a 10 s burst in which every rule fires on every request (every write loses its
  answer, every read fails, every answer is late), and three storms of 503 SlowDown to every request (2-5 s each);
- `none`: the proxy passes everything (its ledger still counts the requests).

Faults run from the first submission until the regime is stopped (the soak stops it with the rest of its chaos);
each regime's span, burst and storm is recorded in the FaultLog, and the proxy's ledger gives the counts per fault
and request kind for the report.
"""
import threading
import time
from collections import Counter

from tests.stado.faultproxy import FaultProxy, Rule

REGIMES = ("none", "5", "20", "burst")
WRITES = ("create", "cas", "put", "delete_if_match", "delete")
READS = ("get", "head", "list")
DELAY_RATE = 0.02
DELAY_MAX = 3.0  # the longest an answer is held, s
BURST_SECONDS, STORMS, STORM_SECONDS = 10.0, 3, (2.0, 5.0)


def rules_for(regime: str) -> list[Rule]:
    if regime == "none":
        return []
    rate = 0.05 if regime == "burst" else int(regime) / 100
    return [Rule("commit_then_lose", kinds=WRITES, rate=rate),
            Rule("fail_before", kinds=READS, rate=rate),
            Rule("delay", rate=DELAY_RATE, delay=(0.5, DELAY_MAX))]


class FaultRegime:
    """Runs a regime on `proxy` from start() to stop(), recording what it did in `faults` (a FaultLog)."""

    def __init__(self, proxy: FaultProxy, regime: str, faults, rng, window: float):
        if regime not in REGIMES:
            raise ValueError(f"unknown fault regime {regime!r}: choose from {', '.join(REGIMES)}")
        self.proxy, self.regime, self.faults, self.rng = proxy, regime, faults, rng
        self.window = window  # the seconds over which the burst and the storms are spread
        self.started = self.stopped = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-regime")

    def start(self) -> None:
        if self.regime == "none":
            return
        self.started = time.time()
        self.proxy.set_rules(rules_for(self.regime))
        if self.regime == "burst":
            self._thread.start()

    def stop(self) -> None:
        """Every fault ends: no rule, no burst, no storm."""
        if self.started is None or self.stopped is not None:
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)
        self.proxy.clear()
        self.stopped = time.time()
        self.faults.add("store_faults", self.started, self.stopped, detail=f"regime {self.regime}")

    def _run(self) -> None:
        """The burst and the storms at random moments of the window, never at once."""
        moments = sorted(self.rng.uniform(0.1, 0.8) * self.window for _ in range(1 + STORMS))
        burst_at = self.rng.randrange(len(moments))
        for i, at in enumerate(moments):
            if self._stop.wait(max(0.0, self.started + at - time.time())):
                return
            t0 = time.time()
            if i == burst_at:
                with self.proxy.burst(rate=1.0, seconds=BURST_SECONDS):
                    self._stop.wait(BURST_SECONDS)
                self.faults.add("store_burst", t0, time.time(), detail=f"every rule at 100% for {BURST_SECONDS:g} s")
            else:
                seconds = self.rng.uniform(*STORM_SECONDS)
                self.proxy.storm(seconds)
                self._stop.wait(seconds)
                self.proxy.calm()
                self.faults.add("store_storm", t0, time.time(), detail=f"503 SlowDown to every request, {seconds:.1f} s")


def injected(proxy: FaultProxy) -> dict[str, Counter]:
    """fault -> request kind -> how many, from the proxy's ledger ("storm" for a storm's 503s; a
    commit_then_lose counted only where the server committed the write: its answer was lost)."""
    out: dict[str, Counter] = {}
    for e in proxy.exchanges():
        if e.fault is None:
            continue
        fault = "commit_then_lose" if e.fault == "commit_then_lose" and e.lost else (
            "forwarded_then_failed" if e.fault == "commit_then_lose" else e.fault)
        out.setdefault(fault, Counter())[e.kind] += 1
    return out


FAULT_LABELS = {"commit_then_lose": "write committed, answer lost", "forwarded_then_failed":
                "write refused by the server, answer replaced", "fail_before": "request failed before the server",
                "delay": "answer held 0.5-3 s", "storm": "503 SlowDown in a storm"}


def describe(counts: dict[str, Counter]) -> list[tuple[str, str]]:
    """(label, "N (kind n, kind n, ...)") per fault, for the report."""
    rows = []
    for fault, label in FAULT_LABELS.items():
        by_kind = counts.get(fault)
        if by_kind:
            rows.append((label, f"{sum(by_kind.values())} (" + ", ".join(
                f"{k} {n}" for k, n in by_kind.most_common()) + ")"))
    return rows
