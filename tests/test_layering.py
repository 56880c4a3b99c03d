"""The architecture stays visible, every "never" of the layout (docs/architecture.md, "Layers"): runkit
imports neither front door; jobman and stado never import each other; a library module never imports its CLI
(a CLI parses, calls the library and renders: the arrow goes one way). Walks every module's imports, absolute
and relative alike, static, so lazy imports inside functions count too."""
import ast
import re
import subprocess
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
FORBIDDEN = {"runkit": {"jobman", "stado"}, "jobman": {"stado"}, "stado": {"jobman"}}
# The command-line modules: they parse, call one library function per command and render.
CLI_MODULES = {"jobman.__main__", "stado.__main__", "jobman.cli", "stado.cli"} | {
    f"{tool}.cli.{path.stem}" for tool in ("jobman", "stado") for path in (SRC / tool / "cli").glob("*.py")
    if path.stem != "__init__"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports anywhere (functions included), relative imports resolved; for
    `from X import name`, X.name too when that is a module of this tree."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(_from_import(node, package))
    return found


def _from_import(node: ast.ImportFrom, package: str) -> set[str]:
    """`from X import a, b` (X relative or not) -> X, and X.a, X.b where those are modules of this tree."""
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
    return {module} | {f"{module}.{alias.name}" for alias in node.names if _module_path(f"{module}.{alias.name}")}


def test_relative_imports_are_resolved():
    found = imported_modules(SRC / "jobman" / "cli" / "control.py")
    assert "jobman.cli" in found and "jobman.commands.restart" in found  # `from . import ...`, `from ..restart import ...`


def test_front_doors_never_import_each_other():
    violations = []
    for package, forbidden in FORBIDDEN.items():
        for path in sorted((SRC / package).rglob("*.py")):
            bad = {m.split(".")[0] for m in imported_modules(path)} & forbidden
            if bad:
                violations.append(f"{path.relative_to(SRC)} imports {', '.join(sorted(bad))}")
    assert violations == []


def test_a_library_module_never_imports_its_cli():
    assert all(_module_path(m) for m in CLI_MODULES)  # the list names real modules
    violations = []
    for package in FORBIDDEN:
        for path in sorted((SRC / package).rglob("*.py")):
            if _module_name(path) in CLI_MODULES:
                continue
            bad = imported_modules(path) & CLI_MODULES
            if bad:
                violations.append(f"{path.relative_to(SRC)} imports {', '.join(sorted(bad))}")
    assert violations == []


def _module_path(name: str) -> Path | None:
    for path in (SRC / (name.replace(".", "/") + ".py"), SRC / name.replace(".", "/") / "__init__.py"):
        if path.exists():
            return path
    return None


def _load_closure(start: str, packages: tuple) -> tuple[set[str], set[tuple[str, str]]]:
    """(the modules of `packages` that loading `start` loads, following load-time imports; (module, import) of
    every load-time import of those modules that lies outside `packages`)."""
    seen, pending, outside = set(), [start], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in _load_time_imports(name):
            if imported.split(".")[0] in packages:
                if _module_path(imported):
                    pending.append(imported)
            else:
                outside.add((name, imported))
    return seen, outside


def _load_time_imports(name: str, *, typing_too: bool = True) -> set[str]:
    """What importing module `name` imports at once: its module-level imports, those inside a
    module-level try or if included (a lazy import inside a function is not taken at load time). `typing_too`:
    with those under `if TYPE_CHECKING:`, which name what a module uses when it loads it by other means (a
    function called at load time that imports it), though Python never runs them."""
    path = _module_path(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    nodes = list(ast.parse(path.read_text()).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.If) and not typing_too and _type_checking(node.test):
            nodes += node.orelse
        elif isinstance(node, (ast.Try, ast.If)):
            nodes += node.body + node.orelse + getattr(node, "finalbody", []) + [
                n for handler in getattr(node, "handlers", []) for n in handler.body]
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(_from_import(node, package))
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in FORBIDDEN for path in sorted((SRC / package).rglob("*.py"))}


def load_time_graph() -> dict[str, set[str]]:
    """Module -> the modules of this tree it imports at load time. An import of a package the module lies in is
    left out: loading a module has loaded its packages first, so that edge closes no circle."""
    modules = _modules()
    return {name: {m for m in _load_time_imports(name, typing_too=False) if m in modules and m != name and not name.startswith(m + ".")}
            for name in modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_is_part_of_a_load_time_import_cycle():
    """A circle of load-time imports makes what a module holds depend on which of them was imported first."""
    assert cycles(load_time_graph()) == []


def private_imports(name: str, source: str, package: str) -> list[str]:
    """`from M import _x` in module `name`, where M is a module of this tree other than `name` itself."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = min(_from_import(node, package), key=len)
            if module.split(".")[0] not in FORBIDDEN or module == name:
                continue
            found += [f"{name} imports {alias.name} from {module}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_the_private_import_check_sees_one():
    assert private_imports("stado.a", "from .b import _c, d\nfrom os import _exit", "stado") == [
        "stado.a imports _c from stado.b"]


def test_no_private_name_is_imported_across_modules():
    """A name with a leading underscore is its module's own: one another module needs is public, under a name that
    says what it is."""
    found = []
    for name, path in _modules().items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found += private_imports(name, path.read_text(), package)
    assert found == []


def test_no_package_binds_a_name_that_shadows_its_submodule():
    """`pkg.x` is one thing: a package whose __init__ binds a function or class named as one of its submodules makes
    `pkg.x` the function or the module depending on who imported what."""
    found = []
    for name, path in _modules().items():
        if path.name != "__init__.py":
            continue
        submodules = {p.stem for p in path.parent.glob("*.py")} | {
            p.name for p in path.parent.iterdir() if (p / "__init__.py").exists()}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound = [node.name]
            elif isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
                bound = [alias.asname or alias.name for alias in node.names]
            elif isinstance(node, ast.Assign):
                bound = [t.id for t in node.targets if isinstance(t, ast.Name)]
            else:
                continue
            found += [f"{name}.{b}" for b in bound if b in submodules]
    assert found == []


# Everything outside runkit and jobman that `jobman __supervise` loads (it starts for every job): before it
# acknowledges its claim (jobman.supervisor.claim) and once it owns the job (jobman.supervisor.owner, loaded after
# the acknowledgement, and again each time a waiter comes back from its lean form: jobman.supervisor.lean_return):
# exactly what it uses today, no more and no less (an entry it no longer needs is taken out, so that a new one is
# seen). A new entry costs every job its import time.
SUPERVISOR_STDLIB = {"errno", "os", "select", "_sqlite3", "sys", "time", "_json"}


def test_supervisor_start_path_imports_only_what_it_uses():
    """Follows the load-time imports from the supervisor's entries through every jobman and runkit module it
    reaches; what lies outside them must be exactly SUPERVISOR_STDLIB."""
    seen, outside = set(), set()
    for start in ("jobman.supervisor", "jobman.supervisor.claim", "jobman.supervisor.owner",  # the owner loads the
                  "jobman.supervisor.attempt", "jobman.supervisor.lean_return",  # attempt when it starts one;
                  "jobman.supervisor.processes"):  # lean_return: what the lean form execs into
        more_seen, more_outside = _load_closure(start, ("jobman", "runkit"))
        seen |= more_seen
        outside |= {imported.split(".")[0] for _, imported in more_outside}
    assert {"jobman.supervisor.attempt", "jobman.store.transitions", "jobman.supervisor.lease"} <= seen  # it follows
    assert outside == SUPERVISOR_STDLIB, (sorted(outside - SUPERVISOR_STDLIB), sorted(SUPERVISOR_STDLIB - outside))


def test_what_the_supervisor_owns_a_job_with_is_loaded_after_its_acknowledgement():
    """`jobman run` waits for the acknowledgement: the modules of a supervisor that owns its job (the owner, its wait
    loop, attempts, the lease) are not on the load-time path from jobman.supervisor.claim, which stops at the claim;
    the package itself loads nothing (its entries are looked up on first use)."""
    assert _load_time_imports("jobman.supervisor") == set()
    seen, pending = set(), ["jobman.supervisor.claim"]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        pending += [m for m in _load_time_imports(name) if m.split(".")[0] in ("jobman", "runkit") and _module_path(m)]
    assert "jobman.store.transitions" in seen
    assert not seen & {"jobman.supervisor.owner", "jobman.supervisor.waiting", "jobman.supervisor.attempt",
                       "jobman.supervisor.lease", "jobman.core.model"}, sorted(seen)


# What only runkit.system.proc (and runkit.system.filelocks, its file locks and their holders) may ask of the OS: calls that are
# Linux's alone or differ between systems (processes, sessions, pidfds, subreapers, file locks, the host's memory,
# /proc). A port to another system is those two modules.
PLATFORM_MODULE = SRC / "runkit" / "system" / "proc.py"
PLATFORM_MODULES = (PLATFORM_MODULE,) + tuple(SRC / "runkit" / "system" / f"{name}.py" for name in (
    "filelocks", "deathwatch", "trees", "exits", "proctable", "host"))
PLATFORM_IMPORTS = {"fcntl", "ctypes", "termios", "msvcrt", "_winapi", "resource"}
PLATFORM_OS_CALLS = {"pidfd_open", "pipe2", "getsid", "killpg", "setsid", "getpgid", "setpgid", "sysconf", "waitpid",
                     "wait", "wait3", "wait4", "waitid", "fork", "forkpty", "posix_spawn", "posix_spawnp"}


def platform_calls(path: Path) -> list[str]:
    """Where `path` reaches the OS past runkit.system.proc: an import of a platform module, one of PLATFORM_OS_CALLS,
    signal.pidfd_send_signal, or a /proc path in code (a docstring may name it)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
                  and isinstance(node.value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in PLATFORM_IMPORTS]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in PLATFORM_IMPORTS:
            found.append(f"{node.lineno}: from {node.module} import")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and ((node.value.id == "os" and node.attr in PLATFORM_OS_CALLS)
                   or (node.value.id == "signal" and node.attr == "pidfd_send_signal"))):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and node.value.startswith("/proc")):
            found.append(f"{node.lineno}: {node.value!r}")
    return found


# A core (runkit's, jobman's, stado's) imports nothing of runkit outside runkit's core, but the fault points: the
# test seam a test plants in any layer, the core's included.
CORE_MAY_REACH = ("runkit.core", "runkit.system.faults")


def test_every_core_imports_only_cores():
    violations = []
    for tool in ("runkit", "jobman", "stado"):
        core = sorted((SRC / tool / "core").rglob("*.py"))
        assert len(core) > 5  # the check sees the core where it is
        violations += [f"{path.relative_to(SRC)}: {m}" for path in core for m in imported_modules(path)
                       if m.split(".")[0] == "runkit" and not any(m == c or m.startswith(c + ".") for c in CORE_MAY_REACH)]
    assert violations == []


# Each tool's layers, each a folder, in the order they may import one another: each only those before it (cli and
# ui, the two front ends, each other too). One import goes the other way, named here: jobman's lease round holder
# runs the reconcile pass, which commands run too.
LAYERS = {"jobman": ("core", "store", "handoff", "supervisor", "commands", "cli", "ui"),
          "stado": ("core", "objectstore", "store", "queue", "jobs", "agent", "commands", "cli", "ui")}
UPWARD = {("jobman.supervisor.lease", "jobman.commands.reconcile"), ("jobman.supervisor.lease", "jobman.commands")}


def _layer(module: str) -> int | None:
    parts = module.split(".")
    layers = LAYERS.get(parts[0], ())
    return layers.index(parts[1]) if len(parts) > 1 and parts[1] in layers else None


def test_each_tool_is_its_layers_and_each_imports_only_those_before_it():
    violations = []
    for tool, layers in LAYERS.items():
        top = {p.name for p in (SRC / tool).iterdir() if p.name != "__pycache__"}
        assert top == {"__init__.py", "__main__.py"} | set(layers), tool  # no module beside the layers
        for path in sorted((SRC / tool).rglob("*.py")):
            me = _module_name(path)
            mine = _layer(me)
            for other in imported_modules(path):
                theirs = _layer(other)
                if (mine is not None and theirs is not None and other.split(".")[0] == tool and theirs > mine
                        and (me, other) not in UPWARD and not {layers[mine], layers[theirs]} <= {"cli", "ui"}):
                    violations.append(f"{me} imports {other}")
    assert violations == []


def test_platform_calls_live_in_runkit_proc_alone():
    assert all(platform_calls(path) for path in PLATFORM_MODULES)  # the check sees them where they are
    violations = [f"{path.relative_to(SRC)}:{where}" for path in sorted(SRC.rglob("*.py")) if path not in PLATFORM_MODULES
                  for where in platform_calls(path)]
    assert violations == []


# The dashboards (`jobman ui`, `stado ui`): their packages and the web framework are loaded by that command alone.
UI_PACKAGES = ("jobman.ui", "stado.ui", "runkit.web")
WEB_FRAMEWORK = {"starlette", "uvicorn", "anyio", "h11", "playwright"}
UI_LAUNCHERS = {"jobman.cli.extras", "stado.cli.fleet"}  # they import the dashboard inside `cmd_ui` only
START_PATHS = ("jobman.cli", "jobman.cli.run", "jobman.supervisor.claim", "jobman.supervisor.owner", "stado.cli",
               "stado.cli.options", "stado.cli.submitting", "stado.cli.agent", "stado.agent")


def _is_ui(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in UI_PACKAGES)


def test_only_the_ui_commands_import_the_dashboards_or_the_web_framework():
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        name = _module_name(path)
        if _is_ui(name):
            continue
        found = {m for m in imported_modules(path) if _is_ui(m) or m.split(".")[0] in WEB_FRAMEWORK}
        if name in UI_LAUNCHERS:
            found &= _load_time_imports(name)  # a lazy import in the command is what launches it
        if found:
            violations.append(f"{path.relative_to(SRC)} imports {', '.join(sorted(found))}")
    assert violations == []
    assert any(_is_ui(m) for m in imported_modules(SRC / "jobman" / "cli" / "extras.py"))  # the check sees the launch


def test_start_up_paths_never_load_the_dashboards():
    """What `jobman run`, the supervisor, `stado submit` and an agent load at start (followed through every module
    of this tree they reach) holds no dashboard module and no web framework; and so it is at run time."""
    import subprocess
    import sys

    for start in START_PATHS:
        seen, outside = _load_closure(start, ("jobman", "runkit", "stado"))
        assert not [m for m in seen if _is_ui(m)], start
        assert not [i for _, i in outside if i.split(".")[0] in WEB_FRAMEWORK], start
    code = ("import sys, jobman.cli, jobman.supervisor, stado.cli, stado.agent; print(sorted(m for m in sys.modules "
            f"if m.split('.')[0] in {sorted(WEB_FRAMEWORK)!r} or m.startswith({UI_PACKAGES!r})))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


# Value objects: on the per-job paths (what `jobman run`, a supervisor and `stado submit` load) runkit.core's two
# shapes, record() (by position) or Frozen (by keyword), which import nothing; elsewhere a frozen dataclass; a stored document is read through
# stado's Document view. No module writes a value class of its own (its own __eq__) or a NamedTuple.
PER_JOB_PATHS = ("jobman.cli.run", "jobman.supervisor.claim", "jobman.supervisor.owner", "jobman.supervisor.lean",
                 "stado.cli.submitting")
VALUE_SHAPES = {"runkit/core/records.py", "runkit/core/frozen.py", "stado/core/documents/records.py"}


def test_value_objects_take_one_shape_per_path():
    import subprocess
    import sys

    own = []
    for path in sorted(SRC.rglob("*.py")):
        name = str(path.relative_to(SRC))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "__eq__":
                own.append(f"{name}: a class with its own __eq__")
            if isinstance(node, (ast.Name, ast.Attribute, ast.alias)) and getattr(
                    node, "id", getattr(node, "attr", getattr(node, "name", ""))) in ("NamedTuple", "namedtuple"):
                own.append(f"{name}: a named tuple")
    assert {entry.partition(":")[0] for entry in own} == VALUE_SHAPES  # the walk sees the shapes where they are
    code = (f"import sys, {', '.join(PER_JOB_PATHS)}; "
            "print(sorted(m for m in ('dataclasses', 'collections', 'typing') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


# Time is an argument: a function that needs the time takes it (`now`) or a clock to read it on (`clock`: runkit's
# Clock, or stado's StoreClock, which speaks the same wall()/monotonic()); none falls back to the host's clock when
# the caller gives none.
def _clock_fallbacks(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
            defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
            for name in ("now", "clock"):
                if name in defaults and isinstance(defaults[name], ast.Constant) and defaults[name].value is None:
                    found.append(f"{node.lineno}: {node.name}({name}=None)")
    return found


def test_the_clock_check_sees_a_fallback(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f(a, *, now=None):\n    pass\ndef g(a, clock=None):\n    pass\ndef h(a, *, now):\n    pass\n")
    assert _clock_fallbacks(sample) == ["1: f(now=None)", "3: g(clock=None)"]


def test_no_function_falls_back_to_the_hosts_clock():
    violations = [f"{path.relative_to(SRC)}:{where}" for path in sorted(SRC.rglob("*.py")) for where in _clock_fallbacks(path)]
    assert violations == []


# --- the repository stands alone --------------------------------------------------------------------------

REPO = SRC.parent
# Where the project explains itself: every tracked file under these must state its rules or point inside the
# repository, never to a document kept elsewhere.
OWN_PLACES = ("src", "tests", "bench", "docs", "demo", "README.md", "Makefile", "pyproject.toml")
# Citations of outside documents: their names, their paths, and "the seed" spoken of as a text (it says, is
# silent, defines...). A random seed of the simulator or the soak ("seed 381", `--seed`, "the seed that found
# it", "drawn from the seed") is not one of them.
OUTSIDE = re.compile(r"DESIGN\.md|shared/seed[s]|\.\./shared|\bseeds? 00\d\b|\bthe seed[']s"
                     r"|\bthe seeds? (?:says?|is|are|asks?|allows?|defines?|describes?|lists?|orders?|puts?|ends?)\b",
                     re.IGNORECASE)


def _tracked(*places: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *places], cwd=REPO, capture_output=True, check=True).stdout
    return [name for name in out.decode().split("\0") if name]


def outside_citations(name: str, text: str) -> list[str]:
    return [f"{name}:{n}: {line.strip()[:100]}" for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]


def _unmasked(text: str) -> str:
    return text.replace("|", "")  # so that this file does not cite what it tests for


def test_the_citation_pattern_tells_a_document_from_a_random_seed():
    for cited in ("see DESIGN|.md", "the handoff (seed| 000)", "Seed| 003: a VM", "the seed|'s words",
                  "as the seed| says", "where the seeds| are silent", "/work/shared/seed|s/003.txt",
                  "..|/shared/STYLE.md"):
        assert OUTSIDE.search(_unmasked(cited)), cited
    for seed in ("simulator seed 397", "make sim SEED=N", "--seed 4242", "the seed that found it", "seed 80:",
                 "drawn from the seed: 1-3 agents", "160 seeds/s", "seeds 2001-2006", "the first seed to explore"):
        assert not OUTSIDE.search(seed), seed


def test_no_file_cites_a_document_outside_the_repository():
    found = []
    for name in _tracked(*OWN_PLACES):
        path = REPO / name
        if not path.is_file() or path.suffix in (".png", ".json"):
            continue
        found += outside_citations(name, path.read_text(errors="replace"))
    assert found == []


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_docs_page_the_readme_names_exists():
    readme = (REPO / "README.md").read_text()
    named = set(re.findall(r"\bdocs/[\w./-]*\.md(?:#[\w-]+)?", readme))
    assert "docs/architecture.md" in {n.partition("#")[0] for n in named}
    missing = []
    for name in sorted(named):
        page, _, anchor = name.partition("#")
        if not (REPO / page).is_file():
            missing.append(page)
        elif anchor and anchor not in {_slug(line.lstrip("#")) for line in (REPO / page).read_text().splitlines()
                                       if line.startswith("#")}:
            missing.append(name)
    assert missing == []


# A path of this tree as the docs and the code's prose write it: src/..., tests/..., bench/..., or a tool's
# package path (jobman/supervisor/lease.py), ending in a file name with an extension. (bench/results/ holds what the
# benchmarks write, not the tree.)
TREE_PATH = re.compile(r"(?<![\w/.-])((?:src|tests|bench|demo)/[\w./-]*\w\.(?:py|md|sh|json|js|css)"
                       r"|(?:runkit|jobman|stado)/[\w/]+\.py)\b")


def test_every_file_the_docs_name_exists():
    """Every path of this tree named in the docs, and in the code's docstrings and comments, is there: a move
    leaves no stale pointer behind."""
    missing = []
    for name in _tracked("docs", "README.md", "src", "tests", "bench"):
        if not name.endswith((".md", ".py")):
            continue
        text = (REPO / name).read_text()
        for path in TREE_PATH.findall(text if name.endswith(".md") else _prose(text)):
            if not path.startswith("bench/results/") and not any((base / path).exists()
                                                                  for base in (REPO, SRC, REPO / "tests")):
                missing.append(f"{name}: {path}")
    assert missing == []


# --- sizes a reader can hold ------------------------------------------------------------------------------

MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60
# Modules still over the bound, each at most the lines it has now: one may shrink (and then leaves this table),
# never grow. An empty table is the goal.
OVERSIZE: dict[str, int] = {}


def test_no_module_grows_past_its_bound():
    sizes = {str(path.relative_to(SRC)): len(path.read_text().splitlines()) for path in SRC.rglob("*.py")}
    over = {name: n for name, n in sizes.items() if n > OVERSIZE.get(name, MAX_MODULE_LINES)}
    assert over == {}
    assert {name for name in OVERSIZE if sizes.get(name, 0) <= MAX_MODULE_LINES} == set()  # shrunk: take it out


def test_no_function_is_longer_than_a_screen():
    long = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


# --- the docs name what is there ------------------------------------------------------------------------------

DOTTED = re.compile(r"(?<![\w./-])((?:jobman|stado|runkit)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")
NOT_MODULES = {"bash", "zsh", "fish", "py", "md", "json", "toml", "db", "log", "sh", "service"}  # file names


def _bound(path: Path) -> set[str]:
    """Names a module binds at its top level (under a module-level if too), and those its __all__ lists."""
    names: set[str] = set()
    nodes = list(ast.parse(path.read_text()).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.If, ast.Try)):
            nodes += node.body + node.orelse
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names.add(name.id)
                if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(node.value, ast.List):
                    names |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return names


def dotted_names_missing(text: str) -> list[str]:
    """Dotted names of this tree (`stado.cli.fleet`, `jobman.commands.api.cancel`) in `text` that name no module, or a name
    its module does not bind."""
    missing = []
    for match in DOTTED.finditer(text):
        parts = match.group(1).split(".")
        if parts[-1] in NOT_MODULES:
            continue
        known = len(parts)
        while known and _module_path(".".join(parts[:known])) is None:
            known -= 1
        module = _module_path(".".join(parts[:known])) if known else None
        if module is None or (known < len(parts) and parts[known] not in _bound(module)):
            missing.append(match.group(1))
    return missing


def test_the_docs_name_check_sees_a_stale_name():
    assert dotted_names_missing("see stado.clifleet and stado.cli.fleet.cmd_ui, jobman.commands.api.nothing_here") == [
        "stado.clifleet", "jobman.commands.api.nothing_here"]


def _prose(source: str) -> str:
    """A Python file's docstrings and comments: where it names other modules in words."""
    import io
    import tokenize

    texts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    texts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT]
    return "\n".join(texts)


def test_every_module_the_docs_name_exists():
    """Every dotted name of this tree in the docs, and in the docstrings and comments of the code, names a module
    that is there (and a name it binds): a rename leaves no stale pointer behind."""
    missing = []
    for name in _tracked("docs", "README.md", "src", "tests", "bench"):
        if name.endswith((".md", ".py")):
            text = (REPO / name).read_text()
            missing += [f"{name}: {dotted}" for dotted in dotted_names_missing(text if name.endswith(".md")
                                                                                else _prose(text))]
    assert missing == []
