"""Violations the soak finds today that belong to bugs already reported and being fixed, each matched narrowly
by its phase and the text the soak writes. The short soak (test_soak.py) prints them and does not fail on
them; anything else fails it. Remove an entry when its fix lands: from then on the soak fails if the bug
comes back. (The long soak, `make soak`, counts every violation, these included.)"""
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    phase: str      # "jobman" or "stado" (either backend)
    where: str      # the issue, or the report that describes the bug
    pattern: str    # matched against the violation's text ("invariant: details")
    what: str

    def matches(self, phase: str, violation: str) -> bool:
        return phase.startswith(self.phase) and re.search(self.pattern, violation) is not None


KNOWN = [
    Known("jobman", "issue 9 (branch jobman-queue)",
          r"^(one-line errors|logs): .*(database or disk is full|database is locked|disk I/O error|OperationalError)",
          "a full disk or a held write lock ends `jobman run` or a supervisor in a traceback"),
    Known("jobman", "issue 9 (branch jobman-queue)",
          r"^explained: .* ended (lost|submission_failed), .*storage faults under way",
          "a supervisor that meets a full disk or a held write lock dies, and its job is recorded lost"),
    Known("stado", "soak finding: a slot starts a reaped job once its inputs arrive (tests/soak/test_findings.py)",
          r"^nothing after terminal: .* a run started .* its agent \(pid \d+\) had been stopped",
          "an agent stopped past its promise while fetching a job's inputs starts that job when it resumes, "
          "though the job was reaped (and ended) meanwhile"),
    Known("stado", "soak finding: a SIGKILLed agent's job runs on alone, and runs again elsewhere beside it",
          r"^(never twice at once|nothing after terminal|left running): .*its agent \(pid \d+\) was killed",
          "an agent SIGKILLed while its job runs leaves the job's process running; once its promise has passed a "
          "sibling's reaper requeues the job and another agent runs it beside the first, which nobody stops "
          "(nor holds to its --timeout): a restarted agent on that host no longer sees it"),
    Known("stado", "soak finding: an agent's store check fails on its own retried probe write",
          r"^agents: agent \S+ exited 1 by itself: .*object store error: control/probe/",
          "an agent starting while the link to the store drops a request exits 1 with `object store error: "
          "control/probe/<hex>`: the store check's first create-if-absent, retried by the client after it landed, "
          "meets its own write as AlreadyExists and does not read back (the nonce rule every other write follows)"),
]


def split(phase: str, violations: list[str]) -> tuple[list[tuple[str, Known]], list[str]]:
    """(known violations with their entry, the others)."""
    known, other = [], []
    for v in violations:
        entry = next((k for k in KNOWN if k.matches(phase, v)), None)
        if entry is None:
            other.append(v)
        else:
            known.append((v, entry))
    return known, other
