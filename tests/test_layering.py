"""The architecture stays visible: runkit imports neither front door; jobman and stado never import
each other. Walks every module's imports (static, so lazy imports inside functions count too)."""
import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
FORBIDDEN = {"runkit": {"jobman", "stado"}, "jobman": {"stado"}, "stado": {"jobman"}}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_front_doors_never_import_each_other():
    violations = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((SRC / package).rglob("*.py")):
            bad = imported_packages(path) & forbidden
            if bad:
                violations.append(f"{path.relative_to(SRC)} imports {', '.join(sorted(bad))}")
    assert violations == []


def test_supervisor_start_path_stays_on_the_standard_library():
    """`jobman __supervise` starts for every job: its module-level imports are stdlib, runkit or jobman."""
    allowed = {"json", "os", "select", "sys", "time", "traceback", "runkit", "jobman", "sqlite3", "signal",
               "errno", "hashlib"}
    for name in ("supervisor.py", "store/schema.py", "store/transitions.py", "store/queries.py", "reconcile.py",
                 "doorbell.py", "scheduling.py", "faults.py", "home.py", "errors.py", "selectors.py", "ack.py",
                 "submit.py"):
        tree = ast.parse((SRC / "jobman" / name).read_text())
        top = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                top.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                top.add(node.module.split(".")[0])
        assert top <= allowed, (name, top - allowed)
