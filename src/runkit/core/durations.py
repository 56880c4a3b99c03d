"""Parsing and printing of durations, sizes and times given on command lines (pure)."""
import time

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION = 100 * 365 * 86400.0  # longer is a typo, and now + MAX_DURATION stays a representable time
MAX_SIZE = 1 << 50  # 1 PiB
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
               "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_duration(text: str) -> float:
    """'1.5s', '500ms', '2m', '1h30m', '1d', or a bare number of seconds -> seconds (>= 0).

    Raises ValueError with a message fit for the user.
    """
    s = text.strip().lower()
    if not s:
        raise ValueError("empty duration: use a number with ms, s, m, h or d (e.g. 30s, 5m)")
    if s.startswith("-"):
        try:
            parse_duration(s[1:])
        except ValueError:
            pass
        else:
            raise ValueError(f"bad duration {text!r}: must be >= 0 (e.g. 30s, 5m)")
    try:
        value = float(s)
    except ValueError:
        value = None
    if value is not None:
        if value < 0 or value != value or value == float("inf"):
            raise ValueError(f"bad duration {text!r}: must be a finite number >= 0 (e.g. 30s, 5m)")
        return _bounded(value, text)
    total, i, n = 0.0, 0, len(s)
    while i < n:
        j = i
        while j < n and (s[j].isdigit() or s[j] == "."):
            j += 1
        k = j
        while k < n and s[k].isalpha():
            k += 1
        number, unit = s[i:j], s[j:k]
        if not number or unit not in _UNITS:
            raise ValueError(f"malformed duration {text!r}: use a number with ms, s, m, h or d (e.g. 1.5s, 2m, 1h30m)")
        try:
            total += float(number) * _UNITS[unit]
        except ValueError:
            raise ValueError(f"malformed duration {text!r}") from None
        i = k
    return _bounded(total, text)


def _bounded(seconds: float, text: str) -> float:
    if seconds > MAX_DURATION:  # float() turns a very long number into inf: caught here too
        raise ValueError(f"bad duration {text!r}: must be at most 100 years (36500d)")
    return seconds


def format_duration(seconds: float | None) -> str:
    """A short human form: 850ms, 12.3s, 4m05s, 2h03m, 3d04h."""
    if seconds is None:
        return "-"
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        return repr(seconds)
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(seconds), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def parse_size(text: str) -> int:
    """'1MB', '512k', '2GiB', '100' (bytes) -> bytes; units are binary (1MB = 1 MiB)."""
    s = text.strip().lower().replace(" ", "")
    i = len(s)
    while i > 0 and s[i - 1].isalpha():
        i -= 1
    number, unit = s[:i], s[i:]
    if unit not in _SIZE_UNITS or not number:
        raise ValueError(f"malformed size {text!r}: use a number with an optional unit K, M or G (e.g. 1MB, 512K)")
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"malformed size {text!r}") from None
    if value < 0 or value != value or value == float("inf"):
        raise ValueError(f"size must be a finite number >= 0, got {text!r}")
    size = value * _SIZE_UNITS[unit]
    if size > MAX_SIZE:
        raise ValueError(f"bad size {text!r}: must be at most 1048576G (1 PiB)")
    return int(size)


def parse_time(text: str, now: float) -> float:
    """An absolute time for --not-before: ISO 8601 ('2026-12-01T09:30', '2026-12-01 09:30:00+01:00'),
    a clock time today ('09:30', '23:15:10'; tomorrow if already past), or '@UNIX_SECONDS'."""
    import datetime

    s = text.strip()
    if not s:
        raise ValueError("empty time: use ISO 8601 (2026-12-01T09:30), HH:MM, or @UNIX_SECONDS")
    if s.startswith("@"):
        try:
            at = float(s[1:])
        except ValueError:
            raise ValueError(f"malformed time {text!r}: @ must be followed by unix seconds") from None
        return _representable(at, text)
    if len(s) in (5, 8) and s[2] == ":":
        try:
            parts = [int(p) for p in s.split(":")]
            clock = datetime.time(*parts)  # type: ignore[arg-type]  # hour, minute[, second]
        except ValueError:
            raise ValueError(f"malformed time {text!r}: use HH:MM or HH:MM:SS") from None
        today = datetime.datetime.fromtimestamp(now).date()
        at = datetime.datetime.combine(today, clock).timestamp()
        return at if at > now else at + 86400
    try:
        when = datetime.datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"malformed time {text!r}: use ISO 8601 (2026-12-01T09:30), HH:MM, or @UNIX_SECONDS") from None
    try:
        at = when.timestamp()
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"bad time {text!r}: out of range (years 1 to 9999)") from None
    return _representable(at, text)


def _representable(at: float, text: str) -> float:
    """`at` if it is a finite time that local time can show (years 1 to 9999), else ValueError."""
    import datetime

    if at != at or at in (float("inf"), float("-inf")):
        raise ValueError(f"bad time {text!r}: must be a finite number of unix seconds")
    try:
        datetime.datetime.fromtimestamp(at)
        time.localtime(at)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"bad time {text!r}: out of range (years 1 to 9999)") from None
    return at


def format_time(at) -> str:
    """A local date and time, '2026-12-01 09:30:00'. A value local time cannot show (a record written
    before times were checked, or damaged) comes back as the raw value: printing never raises."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    except (OverflowError, OSError, ValueError, TypeError):
        return repr(at)
