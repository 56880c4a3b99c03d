"""The pure core: ids, durations, retry policy, eligibility. No I/O, time is an argument."""
import json
import time

import pytest

from jobman.core import scheduling
from runkit.core import ids, retry
from runkit.core.durations import format_duration, parse_duration, parse_size, parse_time


def test_uuid7_is_canonical_and_sorts_by_creation():
    made = [ids.uuid7() for _ in range(2000)]
    assert all(ids.is_uuid7(i) for i in made)
    assert made == sorted(made) and len(set(made)) == len(made)  # strictly increasing within a process
    early, late = ids.uuid7(now_ns=1_000_000_000_000_000), ids.uuid7(now_ns=2_000_000_000_000_000)
    assert early < late
    assert not ids.is_uuid("01a22a90-48fa-772f-a1ff-a85de69fb42") and not ids.is_uuid("X" * 36)


@pytest.mark.parametrize("text, seconds", [("0", 0.0), ("1.5", 1.5), ("500ms", 0.5), ("2m", 120.0),
                                           ("1h30m", 5400.0), ("1d", 86400.0), (" 3S ", 3.0)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "-1", "-1s", "1x", "s", "1.2.3s", "nan", "inf"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_duration():
    assert [format_duration(s) for s in (None, 0.25, 12.34, 125, 7300, 200000)] == \
        ["-", "250ms", "12.3s", "2m05s", "2h01m", "2d07h"]


@pytest.mark.parametrize("text, size", [("100", 100), ("1K", 1024), ("1MB", 1 << 20), ("2GiB", 2 << 30),
                                        ("0", 0), ("1.5m", int(1.5 * (1 << 20)))])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "1TB", "-1M", ""])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_parse_time():
    now = time.mktime((2026, 11, 30, 12, 0, 0, 0, 0, -1))
    assert parse_time("@1800000000", now) == 1800000000.0
    assert parse_time("13:00", now) == now + 3600
    assert parse_time("11:00", now) == now + 23 * 3600  # already past today: tomorrow
    assert parse_time("2026-11-30T12:30:00", now) == now + 1800
    for bad in ("25:00", "noon", "@soon"):
        with pytest.raises(ValueError):
            parse_time(bad, now)


def test_retry_policy():
    policy = {"retries": 2, "exit_codes": [1], "delay": 1.0, "backoff": "constant", "on_timeout": False}
    assert retry.is_retryable(policy, 1, 1, None, False)
    assert retry.is_retryable(policy, 2, 1, None, False)
    assert not retry.is_retryable(policy, 3, 1, None, False)  # two retries used up
    assert not retry.is_retryable(policy, 1, 2, None, False)  # not a retryable code
    assert not retry.is_retryable(policy, 1, None, 9, False)  # a signal is not in the list
    assert not retry.is_retryable(policy, 1, None, None, True)  # timeouts only with on_timeout
    assert not retry.is_retryable(policy, 1, None, None, False)  # a spawn failure never
    anything = dict(policy, exit_codes=None, on_timeout=True)
    assert retry.is_retryable(anything, 1, 3, None, False) and retry.is_retryable(anything, 1, None, 9, False)
    assert retry.is_retryable(anything, 1, None, None, True) and not retry.is_retryable(anything, 1, 0, None, False)
    exponential = dict(policy, backoff="exponential", max_delay=3.0)
    assert [retry.retry_delay(exponential, n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]
    assert retry.retry_delay(policy, 4) == 1.0


def test_dependency_verdicts():
    verdict = scheduling.dependency_verdict
    assert verdict([]) == ("ready", None)
    assert verdict([("a", "success", "finished", "succeeded", "prep")]) == ("ready", None)
    kind, detail = verdict([("a", "success", "running", None, "prep"), ("b", "end", "finished", "failed", None)])
    assert kind == "wait" and "prep (a)" in detail
    kind, detail = verdict([("a", "success", "running", None, "prep", 3), ("b", "end", "running", None, None, 4)])
    assert detail == "dependencies not finished: prep (job 3), job 4"  # by name and handle, not by full ids
    kind, detail = verdict([("a", "success", "finished", "cancelled", None)])
    assert kind == "impossible" and "a ended cancelled" in detail and "--after-success" in detail
    assert verdict([("a", "failure", "finished", "lost", None)]) == ("ready", None)
    assert verdict([("a", "failure", "finished", "succeeded", None)])[0] == "impossible"
    assert verdict([("a", "end", "finished", "submission_failed", None)]) == ("ready", None)


def test_time_and_slot_verdicts():
    assert scheduling.time_verdict(None, None, 10.0) == ("ready", None)
    assert scheduling.time_verdict(20.0, None, 10.0) == ("not_before", 20.0)
    assert scheduling.time_verdict(5.0, 15.0, 10.0) == ("retry", 15.0)
    me = ("m", 0, 5.0)
    assert scheduling.slot_verdict(2, 1, [], me)  # one free slot, nobody in line
    assert scheduling.slot_verdict(2, 1, [("m", 0, 5.0, None)], me)  # first in line
    assert not scheduling.slot_verdict(2, 1, [("a", 0, 4.0, None)], me)  # an earlier job takes the free slot
    assert not scheduling.slot_verdict(2, 1, [("b", 1, 9.0, None)], me)  # so does a later one of higher priority
    assert scheduling.slot_verdict(3, 1, [("a", 0, 4.0, None), ("m", 0, 5.0, None)], me)  # two free, one ahead
    assert scheduling.slot_verdict(2, 1, [("z", 0, 5.0, None)], ("c", 0, 5.0))  # same time: the id decides
    assert not scheduling.slot_verdict(0, 0, [], me)  # paused
    assert not scheduling.slot_verdict(2, 3, [], me)  # over-full (a lost job kept its slot)
    assert scheduling.ahead_of([("a", 0, 4.0), ("m", 0, 5.0), ("b", -1, 1.0)], me) == 1


@pytest.mark.parametrize("data", [{"a": 1, "b": None, "c": True, "d": 1.5, "e": "x\"\\\n\t\u00e9"},
                                  {"detail": "ended with exit code 3", "at": 1796010814.728362}])
def test_event_encoding_is_json(data):
    from runkit.core.jsonfast import dumps  # what jobman's add_event stores

    assert json.loads(dumps(data)) == data


def test_join_negative_values():
    from runkit.cli.fastargs import join_negative_values

    takes = {"--delay", "-n"}.__contains__
    assert join_negative_values(["--delay", "-1s", "--json", "-5", "-n", "-.5", "--", "--delay", "-1"], takes) == \
        ["--delay=-1s", "--json", "-5", "-n=-.5", "--", "--delay", "-1"]
    assert join_negative_values(["--delay", "-x", "--delay=-1"], takes) == ["--delay", "-x", "--delay=-1"]
    with pytest.raises(ValueError, match="must be >= 0"):
        parse_duration("-1s")


def test_durations_and_times_stay_in_range():
    for bad in ("1e300", "36501d", "9" * 400 + "s", "99999999999999999999d"):
        with pytest.raises(ValueError, match="at most 100 years"):
            parse_duration(bad)
    assert parse_duration("36500d") == 36500 * 86400
    now = time.time()
    for bad in ("@1e400", "@nan", "@inf", "@-inf", "@1e14", "@-1e14", "", " "):
        with pytest.raises(ValueError):
            parse_time(bad, now)
    assert parse_time("9999-12-30T00:00", now) > now
    from runkit.core.durations import format_time

    assert [format_time(v) for v in (1e300, float("nan"), "junk")] == ["1e+300", "nan", "'junk'"]
    assert format_duration(float("inf")) == "inf"
    endless = {"retries": 10**6, "delay": 1.0, "backoff": "exponential", "max_delay": None}
    assert retry.retry_delay(endless, 10**6) == 100 * 365 * 86400.0


def test_process_identity_refuses_a_platform_without_proc():
    """Linux is the platform: without /proc every process would look gone (and every supervisor lost), so
    the first look at a process raises instead (run in a process of its own, /proc hidden from runkit)."""
    import subprocess
    import sys

    code = ("from runkit.system import proc, trees\n"
            "proc.PROC_FS = False\n"
            "for look in (lambda: proc.stat(1), trees.all_stats):\n"
            "    try:\n"
            "        look()\n"
            "    except proc.UnsupportedPlatform as e:\n"
            "        print(e)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "no /proc here: jobman and stado run on Linux only\n" * 2
