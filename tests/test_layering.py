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


def _module_path(name: str) -> Path | None:
    for path in (SRC / (name.replace(".", "/") + ".py"), SRC / name.replace(".", "/") / "__init__.py"):
        if path.exists():
            return path
    return None


def _load_time_imports(name: str) -> set[str]:
    """What importing module `name` imports at once: its module-level imports, those inside a
    module-level try or if included (a lazy import inside a function is not taken at load time)."""
    path = _module_path(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    nodes = list(ast.parse(path.read_text()).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.Try, ast.If)):
            nodes += node.body + node.orelse + getattr(node, "finalbody", []) + [
                n for handler in getattr(node, "handlers", []) for n in handler.body]
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if _module_path(f"{module}.{alias.name}"))
    return found


# Everything outside runkit and jobman that `jobman __supervise` loads before it acknowledges its claim
# (it starts for every job): exactly what it uses today. A new entry costs every job its import time.
SUPERVISOR_STDLIB = {"errno", "os", "select", "sqlite3", "sys", "time", "_json"}


def test_supervisor_start_path_imports_only_what_it_uses():
    """Follows the load-time imports from jobman.supervisor through every jobman and runkit module it
    reaches; what lies outside them must be in SUPERVISOR_STDLIB."""
    seen, pending, outside = set(), ["jobman.supervisor"], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in _load_time_imports(name):
            if imported.split(".")[0] in ("jobman", "runkit"):
                if _module_path(imported):
                    pending.append(imported)
            else:
                outside.add(imported.split(".")[0])
    assert {"jobman.eligibility", "jobman.attempt", "jobman.store.transitions"} <= seen  # the walk follows
    assert outside <= SUPERVISOR_STDLIB, sorted(outside - SUPERVISOR_STDLIB)
