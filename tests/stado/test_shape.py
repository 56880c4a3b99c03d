"""The shape of stado, kept by walking its source (as tests/test_layering.py keeps the layers):

- typed records at the edge of storage: no module but the documents package reads a job document by a string key, and the
  phase names are spelled there alone;
- an owner is one object with declared state: the agent's classes create no attribute outside __init__, and its
  collaborators are given an AgentContext, never the Agent;
- problems are values: no decision reads the words of a log line;
- time is an argument: the agent's package reads no clock of its own (it is given a runkit.core.clock.Clock).
"""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "stado"
# Keys only a job document has (agents' records, schedules, manifests and the status JSON have none of them).
JOB_ONLY = {"phase", "claim", "claimed_from", "claimed_at", "requeued_from", "lease_seconds", "lease_expires_at",
            "requeues", "failures", "handbacks", "reaped", "requeue", "settled_by", "last_attempt", "last_result",
            "requeue_reason", "cancelled_by", "rerun_of", "rerun_inputs"}
PHASES = {"finishing", "cancelling"}


# What renders the status JSON (documents.status_json's output: a view for people, not a job document).
VIEWS = {"render.py", "watch.py"}


def _modules():
    return [p for p in sorted(SRC.rglob("*.py")) if p.parent.name != "documents"]


def _string_reads(tree) -> list[tuple[int, str]]:
    """(line, key) of every `x["key"]` and `x.get("key", ...)` with a literal key."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            found.append((node.lineno, node.slice.value))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
    return found


def test_no_module_but_documents_reads_a_job_document_by_a_string_key():
    bad = [f"{p.relative_to(SRC)}:{line}: {key!r}" for p in _modules() if p.name not in VIEWS
           for line, key in _string_reads(ast.parse(p.read_text())) if key in JOB_ONLY]
    assert bad == []


def test_the_phase_names_are_spelled_in_documents_alone():
    bad = []
    for p in _modules():
        tree = ast.parse(p.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        bad += [f"{p.relative_to(SRC)}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and n.value in PHASES and id(n) not in docstrings
                and not (p.name == "cancellation.py" and n.value == "finishing")]  # a CancelReport kind of its own
    assert bad == []


def test_the_checks_see_what_they_look_for():
    tree = ast.parse('doc["phase"]; doc.get("requeues", 0); x = "cancelling"')
    assert {key for _, key in _string_reads(tree)} == {"phase", "requeues"}


def _attributes_set_outside_init(cls: ast.ClassDef) -> list[str]:
    declared = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
            declared |= {t.attr for n in ast.walk(fn) for t in getattr(n, "targets", [getattr(n, "target", None)])
                         if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}
            declared |= {e.attr for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets
                         if isinstance(t, ast.Tuple) for e in t.elts
                         if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"}
    outside = []
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name != "__init__":
            for n in ast.walk(fn):
                targets = list(getattr(n, "targets", [])) + ([n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else [])
                for t in targets:
                    for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                        if (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self"
                                and e.attr not in declared):
                            outside.append(f"{cls.name}.{e.attr} (in {fn.name})")
    return outside


def test_the_agents_classes_declare_their_state_in_init():
    bad = []
    for p in sorted((SRC / "agent").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                bad += _attributes_set_outside_init(node)
    assert bad == []


def test_collaborators_get_the_context_never_the_agent():
    """Only owner.py knows the Agent; the claim pass, the runner, the slot's end and the take-over import it not."""
    for name in ("claim_pass", "runner", "slotend", "takeover", "context"):
        tree = ast.parse((SRC / "agent" / f"{name}.py").read_text())
        imported = {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "owner" not in imported and not any(m.endswith(".owner") for m in imported), name


def test_no_decision_reads_the_words_of_a_log_line():
    bad = []
    for p in sorted((SRC / "agent").glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            if (isinstance(n, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops)
                    and isinstance(n.left, ast.Constant) and isinstance(n.left.value, str) and " " in n.left.value):
                bad.append(f"{p.name}:{n.lineno}: {n.left.value!r} in ...")
    assert bad == []


def test_the_agents_package_reads_no_clock_of_its_own():
    """Its time comes in as a Clock (the store's clock counts on it); the one exception waits on real processes
    of this host that are no job of the agent's (takeover._stop_pids). Beside the agent, not in it: the keeper
    (keeper.py, and standin.py, what it asks of the store), a process of its own on its own time, and drain.py,
    the command that waits for this host's agents."""
    bad = []
    for p in sorted((SRC / "agent").glob("*.py")):
        if p.name in ("jobio.py", "processhost.py"):  # adapters on threads and real processes: real time
            continue
        if p.name in ("keeper.py", "standin.py", "drain.py"):
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "time"
                    and n.attr in ("time", "monotonic") and not (p.name == "takeover.py")):
                bad.append(f"{p.name}:{n.lineno}: time.{n.attr}")
    assert bad == []
