"""The shape of jobman's supervisor, kept by walking its source (as tests/stado/test_shape.py keeps
stado's agent):

- an owner is one object with declared state: no class of jobman/supervisor/ creates an attribute outside
  __init__, and the collaborators (the lease, the wait loop, an attempt, the round) never import the owner;
- collaborators return decisions and the owner records them: only owner.py ends an attempt or finishes a job;
- time is an argument: the package reads no clock of its own (it is given a runkit.core.clock.Clock), nor asks the OS
  about processes but through its process layer (processes.py).
"""
import ast
from pathlib import Path

from tests.stado.test_shape import _attributes_set_outside_init

SRC = Path(__file__).resolve().parents[2] / "src" / "jobman"
PACKAGE = SRC / "supervisor"
COLLABORATORS = ("lease", "waiting", "attempt", "lease_round", "context", "processes")


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text())


def test_the_supervisors_classes_declare_their_state_in_init():
    bad = []
    for p in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                bad += [f"{p.name}: {where}" for where in _attributes_set_outside_init(node)]
    assert bad == []


def test_the_check_sees_an_attribute_set_outside_init():
    [cls] = ast.parse("class A:\n def __init__(self): self.a = 1\n def f(self): self.b = 2").body
    assert _attributes_set_outside_init(cls) == ["A.b (in f)"]


def test_collaborators_never_import_the_owner():
    for name in COLLABORATORS:
        imported = {n.module or "" for n in ast.walk(_tree(name)) if isinstance(n, ast.ImportFrom)}
        assert not any(m == "owner" or m.endswith(".owner") for m in imported), name


def test_only_the_owner_records_an_attempts_end_or_the_jobs():
    recorded = {}
    for p in sorted(PACKAGE.glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "transitions"
                    and n.attr in ("end_attempt", "finish")):
                recorded.setdefault(p.name, set()).add(n.attr)
    assert recorded == {"owner.py": {"end_attempt", "finish"}}


# Beside the owner's decisions, not among them: the --on-finish hook runs after the outcome is recorded, and
# lean.py is the lean form's shell and how a command tells it from Python (`jobman show`).
BESIDE_THE_DECISIONS = ("hooks.py", "lean.py")


def test_the_package_reads_no_clock_and_asks_the_os_through_its_process_layer():
    bad = []
    for p in sorted(p for p in PACKAGE.glob("*.py") if p.name not in BESIDE_THE_DECISIONS):
        for n in ast.walk(ast.parse(p.read_text())):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "time"
                    and n.attr in ("time", "monotonic")):
                bad.append(f"{p.name}:{n.lineno}: time.{n.attr}")
            if (p.name not in ("processes.py", "claim.py", "lean_return.py") and isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name) and n.value.id == "proc"
                    and n.attr not in ("describe_status", "signal_name")):  # pure: a wait status decoded
                bad.append(f"{p.name}:{n.lineno}: proc.{n.attr}")
    assert bad == []
