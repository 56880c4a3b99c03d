"""runkit.core.pipeline: a TOML file of named jobs read into plain records, every mistake one line naming the file,
the job and the field."""
import pytest

from runkit.core import pipeline
from runkit.core.pipeline import Dependency, PipelineError

FULL = """
[defaults]
retries = 1
env = { SHARED = "yes", SEED = "0" }

[jobs.prepare]
command = ["sh", "-c", "echo prep"]

[jobs.train]
command = "python train.py"
after_success = ["prepare"]
retries = 2
retryable_exit_codes = [75]
retry_delay = "1.5s"
retry_backoff = "exponential"
timeout = "2h"
group = "gpu"
env = { SEED = "1" }
cwd = "/tmp"
cores = 4
log_limit = "1MB"

[jobs.report]
command = "echo done"
after = ["train", "@12"]
after_failure = "prepare"
"""


def test_a_file_reads_into_jobs_in_file_order_with_defaults_applied():
    prepare, train, report = pipeline.parse(FULL, "p.toml")
    assert [j.name for j in (prepare, train, report)] == ["prepare", "train", "report"]
    assert prepare.argv == ("sh", "-c", "echo prep") and prepare.retries == 1 and prepare.depends == ()
    assert train.argv == ("sh", "-c", "python train.py")  # a string runs through sh -c
    assert (train.retries, train.retryable_exit_codes, train.retry_delay, train.retry_backoff) == (
        2, (75,), 1.5, "exponential")
    assert train.timeout == 7200.0 and train.group == "gpu" and train.cwd == "/tmp" and train.cores == 4
    assert train.log_limit == 1024 * 1024
    assert train.env == {"SHARED": "yes", "SEED": "1"}  # the job's variables over the defaults'
    assert train.depends == (Dependency("prepare", "success", False),)
    assert report.depends == (Dependency("prepare", "failure", False), Dependency("train", "end", False),
                              Dependency("12", "end", True))
    assert "cores" in train.set and "cores" not in prepare.set and "retries" in prepare.set
    assert prepare.timeout is None and prepare.group is None  # not given: the tool's default


def test_submission_order_puts_each_job_after_what_it_depends_on():
    text = """
[jobs.report]
command = "true"
after = ["evaluate"]
[jobs.evaluate]
command = "true"
after_success = ["a", "b"]
[jobs.a]
command = "true"
[jobs.b]
command = "true"
after_success = ["a"]
"""
    jobs = pipeline.parse(text, "p.toml")
    assert [j.name for j in jobs] == ["report", "evaluate", "a", "b"]
    assert [j.name for j in pipeline.submission_order(jobs)] == ["a", "b", "evaluate", "report"]


@pytest.mark.parametrize("text, message", [
    ("[jobs.a]\ncommand = 'x'\ngpus = 2\n", "p.toml: job a: field gpus is unknown"),
    ("[jobs.a]\ncommand = 'x'\nretries = 'two'\n", "p.toml: job a: field retries must be a whole number"),
    ("[jobs.a]\ncommand = 'x'\nretries = -1\n", "p.toml: job a: field retries must be from 0 to"),
    ("[jobs.a]\ncommand = 'x'\ntimeout = 'soon'\n", "p.toml: job a: field timeout is not a duration: malformed"),
    ("[jobs.a]\ncommand = 'x'\nenv = { A = 1 }\n", "p.toml: job a: field env must be a table"),
    ("[jobs.a]\ncommand = 'x'\nretry_backoff = 'linear'\n", "field retry_backoff must be one of constant, exponential"),
    ("[jobs.a]\ncommand = 'x'\nretryable_exit_codes = [300]\n", "field retryable_exit_codes must be a list of exit"),
    ("[jobs.a]\ncommand = []\n", "p.toml: job a: field command must be a string"),
    ("[jobs.a]\ncwd = '/'\n", "p.toml: job a: field command is missing"),
    ("[jobs.a]\ncommand = 'x'\nafter_success = ['nosuch']\n",
     "p.toml: job a: field after_success: no job 'nosuch' in this file (an existing job is written @nosuch)"),
    ("[jobs.a]\ncommand = 'x'\nafter = ['a']\n", "p.toml: job a: field after: a job cannot depend on itself"),
    ("[jobs.a]\ncommand = 'x'\nafter_success = [1]\n", "field after_success must be a list of non-empty strings"),
    ("[defaults]\ncommand = 'x'\n[jobs.a]\ncommand = 'x'\n", "p.toml: defaults: field command belongs to each job"),
    ("[defaults]\nbogus = 1\n[jobs.a]\ncommand = 'x'\n", "p.toml: defaults: field bogus is unknown"),
    ("[job.a]\ncommand = 'x'\n", "p.toml: unknown table or key 'job'"),
    ("title = 'x'\n", "p.toml: unknown table or key 'title'"),
    ("[defaults]\nretries = 1\n", "p.toml: no job in it"),
    ("[jobs.a\ncommand = 'x'\n", "p.toml: not valid TOML"),
    ("[jobs]\na = 1\n", "p.toml: job a must be a table"),
])
def test_a_mistake_is_one_line_naming_the_file_the_job_and_the_field(text, message):
    with pytest.raises(PipelineError) as caught:
        pipeline.parse(text, "p.toml")
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_cycle_is_named():
    text = "[jobs.a]\ncommand = 'x'\nafter = ['c']\n[jobs.b]\ncommand = 'x'\nafter = ['a']\n" \
           "[jobs.c]\ncommand = 'x'\nafter_success = ['b']\n"
    with pytest.raises(PipelineError, match=r"p.toml: job a: its dependencies make a cycle: a -> c -> b -> a"):
        pipeline.parse(text, "p.toml")


def test_external_references_are_left_to_the_tool():
    text = """
[jobs.a]
command = "true"
after_success = ["@prepare_data", "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "17"]
"""
    [job] = pipeline.parse(text, "p.toml")
    assert job.depends == (Dependency("prepare_data", "success", True),
                           Dependency("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "success", True),
                           Dependency("17", "success", True))
    assert pipeline.submission_order((job,)) == (job,)


def test_a_tool_refuses_the_fields_it_cannot_honour():
    jobs = pipeline.parse(FULL, "pipeline.toml")
    supported = set(pipeline.FIELDS) - {"cores"}
    with pytest.raises(PipelineError) as caught:
        pipeline.refuse_unsupported(jobs, supported, "jobman", "pipeline.toml")
    assert str(caught.value) == "pipeline.toml: job train: field cores is not supported by jobman"
    pipeline.refuse_unsupported(jobs, set(pipeline.FIELDS), "stado", "pipeline.toml")  # all known: accepted


def test_load_reads_a_file_and_names_what_cannot_be_read(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("[jobs.one]\ncommand = ['true']\n")
    assert [j.name for j in pipeline.load(str(path))] == ["one"]
    with pytest.raises(PipelineError, match="cannot read it"):
        pipeline.load(str(tmp_path / "missing.toml"))
    path.write_bytes(b"[jobs.one]\ncommand = '\xff'\n")
    with pytest.raises(PipelineError, match="not UTF-8"):
        pipeline.load(str(path))
