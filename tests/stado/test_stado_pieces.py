"""Pure pieces: redaction, batch files, the job environment, admission, and the import layering."""
import ast
import pathlib

import pytest

from runkit.core.redact import REDACTED, StreamRedactor, redact_text, secret_values
from stado.core.admission import Offer, why_not
from stado.agent.environment import JOB_NAMES, job_environment
from stado.core.errors import BadInput, UnsafeArtifactName
from stado.core.spec import check_artifact_name

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("text, leaked", [
    ("key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abcdefgh", "eyJhbGciOiJIUzI1NiJ9"),
    ("token ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123456789"),
    ("glpat-abcdefghij0123456789", "glpat-abcdefghij"),
    ("xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
    ("https://user:hunter22@example.com/repo", "hunter22"),
    ("DB_PASSWORD=correct-horse-battery", "correct-horse-battery"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXk"),
])
def test_common_credential_shapes_are_redacted(text, leaked):
    out = redact_text(text)
    assert leaked not in out and REDACTED in out


def test_ordinary_text_is_left_alone():
    text = "epoch 3: loss 0.25, tokens 1024, see https://example.com/docs\n"
    assert redact_text(text) == text


def test_secret_values_come_from_secret_names_and_url_passwords():
    env = {"GH_TOKEN": "abcdef123456", "PATH": "/usr/bin", "SHORT_KEY": "abc",
           "https_proxy": "http://me:pr0xypass@proxy:3128"}
    assert set(secret_values(env)) == {"abcdef123456", "pr0xypass"}


def test_a_secret_split_across_pieces_never_escapes():
    secret = "the-agent-secret-42"
    stream = StreamRedactor([secret])
    data = f"line one\nvalue {secret} tail\n-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"
    out = b"".join(stream.feed(data[i:i + 3].encode()) for i in range(0, len(data), 3)) + stream.feed(b"", final=True)
    assert secret.encode() not in out and b"AAAA" not in out
    assert out.startswith(b"line one\nvalue [REDACTED] tail\n")


def test_an_unterminated_private_key_block_is_masked_at_the_end():
    stream = StreamRedactor()
    out = stream.feed(b"ok\n-----BEGIN PRIVATE KEY-----\nMIIsecret\n") + stream.feed(b"", final=True)
    assert b"MIIsecret" not in out and out.startswith(b"ok\n")


def test_job_environment_is_the_runtime_list_plus_the_job_list():
    agent = {"PATH": "/bin", "HOME": "/root", "LC_ALL": "C", "AWS_SECRET_ACCESS_KEY": "x", "PYTHONPATH": "/x",
             "https_proxy": "http://p:3128", "CUDA_VISIBLE_DEVICES": "0", "STADO_CONFIG": "/etc/stado.toml"}
    env = job_environment(agent, stado_bin="/usr/bin/stado", job_id="J", started_at="T", inputs_json="[]",
                          inputs_file="/w/inputs.json", cores=4)
    assert set(env) == {"PATH", "HOME", "LC_ALL", "https_proxy", "CUDA_VISIBLE_DEVICES", *JOB_NAMES}
    assert env["CARGO_BUILD_JOBS"] == "4" and env["GIT_TERMINAL_PROMPT"] == "false"


def test_admission_fence():
    offer = Offer(frozenset({"x86", "docker"}), cores=4, memory=8 << 30, accelerators=0)
    assert why_not({"capabilities": ["x86"], "cores": 2}, offer) is None
    assert "capabilities gpu" in why_not({"capabilities": ["gpu"]}, offer)
    assert "providers aws" in why_not({"providers": ["aws"]}, offer)
    assert "spot" in why_not({"spot": "require"}, offer)
    assert "8 cores" in why_not({"cores": 8}, offer)
    assert "accelerators" in why_not({"accelerators": 1}, offer)


def test_agent_liveness_is_judged_from_its_own_recorded_window_with_a_floor():
    from stado.core.admission import is_live, live_for, refresh_seconds, unschedulable
    from stado.core.documents import iso

    assert (refresh_seconds(0.1), refresh_seconds(2), refresh_seconds(5), refresh_seconds(60)) == (1, 12, 30, 30)
    assert (live_for(1), live_for(12), live_for(30)) == (10, 36, 90)
    fast = {"last_seen": iso(1000), "live_for": live_for(refresh_seconds(0.1)), "capabilities": ["gpu"],
            "instance_ref": "local@a"}
    assert is_live(fast, 1009.9) and not is_live(fast, 1010.1)
    assert is_live({"last_seen": iso(1000), "live_for": 1}, 1009)  # never under the floor
    assert not is_live({"last_seen": iso(1000)}, 1001)  # a record that states no window cannot be judged
    assert not is_live({}, 0) and not is_live({"last_seen": "yesterday"}, 0)
    x86 = dict(fast, capabilities=["x86"], instance_ref="local@b", last_seen=iso(1100))
    assert unschedulable({"capabilities": ["gpu"]}, [fast, x86], now=1005) is None
    assert "local@b: needs capabilities gpu" in unschedulable({"capabilities": ["gpu"]}, [fast, x86], now=1105)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a\\b", "x\0y", " padded"])
def test_unsafe_artifact_names(name):
    with pytest.raises(UnsafeArtifactName):
        check_artifact_name(name)


def test_batch_formats(tmp_path):
    from argparse import Namespace

    from stado.commands.batch import read_batch, submission_from_args

    args = Namespace(name=None, priority=0, capabilities=["gpu"], cores=2, memory=None, accelerators=0, provider=[],
                     spot="allow", cost_cap=None, timeout="10m", retries=0, input=[])
    defaults = submission_from_args(args, command="true")
    text = tmp_path / "jobs.txt"
    text.write_text("echo a\n\n# skip\necho b\n")
    items = read_batch(str(text), defaults)
    assert [i.spec.command for i in items] == ["echo a", "echo b"]
    assert items[0].spec.cores == 2 and items[0].spec.timeout == 600 and items[0].spec.capabilities == ("gpu",)
    toml = tmp_path / "jobs.toml"
    toml.write_text('[[job]]\ncommand = "train"\nname = "t"\nmemory = "2G"\ninputs = ["prep:data.csv"]\n')
    (item,) = read_batch(str(toml), defaults)
    assert item.spec.memory == 2 << 30 and item.inputs == (("prep", "data.csv"),) and item.spec.name == "t"
    bad = tmp_path / "bad.json"
    bad.write_text('["ok", {"command": ""}]')
    with pytest.raises(BadInput, match="entry 2: empty command"):
        read_batch(str(bad), defaults)


def _defaults(**flags):
    from argparse import Namespace

    from stado.commands.batch import submission_from_args

    args = dict(name=None, priority=0, capabilities=[], cores=1, memory=None, accelerators=0, provider=[],
                spot="allow", cost_cap=None, timeout=None, retries=0, input=[])
    args.update(flags)
    return submission_from_args(Namespace(**args), command="true")


@pytest.mark.parametrize("entries, words", [
    ('[{"command": "echo a", "capabilities": 5}]', "entry 1: capabilities must be"),
    ('[{"command": "echo a", "capabilities": ["gpu", 5]}]', "entry 1: capabilities must be"),
    ('[{"command": "echo a", "inputs": [5]}]', "entry 1: inputs must be"),
    ('[{"command": "echo a", "inputs": "prep:x"}]', "entry 1: inputs must be"),
    ('["ok", {"command": 5}]', "entry 2: command must be text"),
    ('[{"command": "echo a", "name": 5}]', "entry 1: name must be text"),
    ('[{"command": "echo a", "memory": [1]}]', "entry 1: memory must be"),
    ('[{"command": "echo a", "timeout": {"s": 1}}]', "entry 1: timeout must be"),
    ('[{"command": "echo a", "provider": {"x": 1}}]', "entry 1: provider must be"),
    ('[{"command": "echo a", "spot": ["allow"]}]', "entry 1: spot must be"),
])
def test_batch_entries_of_the_wrong_type_are_one_line_bad_input(tmp_path, entries, words):
    from stado.commands.batch import read_batch

    path = tmp_path / "jobs.json"
    path.write_text(entries)
    with pytest.raises(BadInput) as caught:
        read_batch(str(path), _defaults())
    assert words in str(caught.value) and "nothing was submitted" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_plain_batch_file_whose_lines_start_with_brackets_or_braces_is_lines(tmp_path):
    from stado.commands.batch import read_batch

    path = tmp_path / "jobs"
    path.write_text("[ -e /etc/passwd ] && echo yes\n{ echo a; }\n")
    assert [i.spec.command for i in read_batch(str(path), _defaults())] == ["[ -e /etc/passwd ] && echo yes",
                                                                          "{ echo a; }"]
    (tmp_path / "braces.txt").write_text("{ echo a; }\n")
    assert [i.spec.command for i in read_batch(str(tmp_path / "braces.txt"), _defaults())] == ["{ echo a; }"]
    # Content that parses as JSON or TOML is read as such, whatever the file's name.
    (tmp_path / "list").write_text('[{"command": "echo j"}]')
    assert [i.spec.command for i in read_batch(str(tmp_path / "list"), _defaults())] == ["echo j"]
    (tmp_path / "tables").write_text('[[job]]\ncommand = "echo t"\n')
    assert [i.spec.command for i in read_batch(str(tmp_path / "tables"), _defaults())] == ["echo t"]
    # A file named .json must be JSON.
    (tmp_path / "bad.json").write_text("{ echo a; }\n")
    with pytest.raises(BadInput, match="not valid JSON"):
        read_batch(str(tmp_path / "bad.json"), _defaults())


def test_batch_flags_input_and_name_are_defaults_for_the_entries(tmp_path):
    from stado.commands.batch import read_batch

    lines = tmp_path / "jobs.txt"
    lines.write_text("echo a\necho b\n")
    items = read_batch(str(lines), _defaults(input=["prod:out.txt"]))
    assert [i.inputs for i in items] == [(("prod", "out.txt"),)] * 2
    as_json = tmp_path / "jobs.json"
    as_json.write_text('[{"command": "a"}, {"command": "b", "inputs": ["other:in.txt"]}]')
    items = read_batch(str(as_json), _defaults(input=["prod:out.txt"]))
    assert [i.inputs for i in items] == [(("prod", "out.txt"),), (("other", "in.txt"),)]  # an entry's own wins
    one = tmp_path / "one.txt"
    one.write_text("echo only\n")
    (item,) = read_batch(str(one), _defaults(name="nm"))
    assert item.spec.name == "nm"
    named = tmp_path / "named.json"
    named.write_text('[{"command": "a", "name": "own"}]')
    assert read_batch(str(named), _defaults(name="nm"))[0].spec.name == "own"
    with pytest.raises(BadInput, match="--name names one job, but batch file .* holds 2"):
        read_batch(str(lines), _defaults(name="nm"))


def test_stado_never_imports_jobman():
    offenders = []
    for path in (SRC / "stado").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.name}: {n}" for n in names if n == "jobman" or n.startswith("jobman.")]
    assert offenders == []


def test_the_pure_core_does_no_io():
    """The core folder, every module of it, and the agent's two pure pieces (its promise, a job's environment)."""
    io_modules = {"subprocess", "socket", "shutil", "fcntl", "select", "signal", "obstore"}
    core = sorted((SRC / "stado" / "core").rglob("*.py"))
    assert len(core) > 8  # the check sees the core where it is
    for path in core + [SRC / "stado" / "agent" / "lease.py", SRC / "stado" / "agent" / "environment.py"]:
        _no_io(path, io_modules)


def _no_io(path, io_modules) -> None:
    """`path` imports no I/O module and nothing of the object store (a package of the core: each of its modules)."""
    tree = ast.parse(path.read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & io_modules, (path.name, imported & io_modules)
    assert "objectstore" not in {(n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def test_the_docs_warn_that_the_local_directory_is_for_one_host():
    root = SRC.parent
    guide = (root / "docs" / "stado.md").read_text()
    readme = (root / "README.md").read_text()
    stado_part = readme[readme.index("## stado"):]
    stado_part = stado_part[:stado_part.index("\n## ", 1)]
    for text in (guide, stado_part):
        assert "flock" in text and "NFS" in text and "one host" in text
