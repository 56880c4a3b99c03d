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
