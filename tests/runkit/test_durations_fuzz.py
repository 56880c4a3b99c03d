"""Durations, sizes and times as users type them (runkit.core.durations): any text gives a value in range or a
ValueError with a message, never another exception; well-formed text gives exactly the value it spells."""
import math
import time

from hypothesis import given, strategies as st

from runkit.core.durations import MAX_DURATION, MAX_SIZE, format_duration, format_time, parse_duration, parse_size, parse_time

from tests.fuzzing import examples

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
              "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}
# What people type, and what they mistype: digits of every script, signs, exponents, spaces, unit letters.
TYPED = st.one_of(st.text(max_size=16),
                  st.text(alphabet="0123456789.-+eE _smhdkgibKMGB@:T١٢\u00a0\x00", max_size=14),
                  st.from_regex(r"\A-?[0-9]{0,20}(\.[0-9]{0,5})?(ms|s|m|h|d|k|kb|mib|g)?\Z"))


def _message(e: ValueError) -> None:
    assert str(e) and "\n" not in str(e), repr(e)


@examples(400)
@given(TYPED)
def test_any_duration_text_is_a_bounded_number_or_a_clear_error(text):
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        return _message(e)
    assert isinstance(seconds, float) and 0.0 <= seconds <= MAX_DURATION and not math.isnan(seconds), (text, seconds)


@examples(150)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(sorted(UNITS))), min_size=1, max_size=4))
def test_a_well_formed_duration_is_the_sum_of_its_parts(parts):
    text = "".join(f"{n}{unit}" for n, unit in parts)
    expected = sum(n * UNITS[unit] for n, unit in parts)
    assert math.isclose(parse_duration(text), expected, rel_tol=1e-12), text
    assert math.isclose(parse_duration(f" {text.upper()} "), expected, rel_tol=1e-12), text


@examples(400)
@given(TYPED)
def test_any_size_text_is_a_bounded_count_of_bytes_or_a_clear_error(text):
    try:
        size = parse_size(text)
    except ValueError as e:
        return _message(e)
    assert isinstance(size, int) and 0 <= size <= MAX_SIZE, (text, size)


@examples(150)
@given(st.integers(0, 1 << 20), st.sampled_from(sorted(SIZE_UNITS)))
def test_a_well_formed_size_is_its_number_times_its_unit(n, unit):
    assert parse_size(f"{n}{unit}") == n * SIZE_UNITS[unit]
    assert parse_size(f"{n} {unit.upper()}") == n * SIZE_UNITS[unit]


@examples(400)
@given(st.one_of(TYPED, st.datetimes().map(lambda t: t.isoformat()), st.floats().map(lambda f: f"@{f}"),
                 st.tuples(st.integers(-5, 30), st.integers(-5, 70)).map(lambda p: f"{p[0]:02d}:{p[1]:02d}")))
def test_any_time_text_is_a_time_local_time_can_show_or_a_clear_error(text):
    now = time.time()
    try:
        at = parse_time(text, now)
    except ValueError as e:
        return _message(e)
    assert isinstance(at, float) and math.isfinite(at), (text, at)
    time.localtime(at)  # representable: it can be shown
    if len(text.strip()) in (5, 8) and text.strip()[2:3] == ":":
        assert now < at <= now + 86400 + 3600, (text, at - now)  # a clock time: the next one (DST aside)


@examples(300)
@given(st.one_of(st.none(), st.floats(), st.integers(-10**20, 10**20)))
def test_durations_and_times_always_print(value):
    assert isinstance(format_duration(value), str)
    assert isinstance(format_time(value), str)
