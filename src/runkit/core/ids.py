"""Time-sortable ids: UUIDv7 (RFC 9562), since Python 3.11 has no uuid.uuid7.

The stdlib uuid module costs ~15 ms to import, so ids are built from os.urandom and time.
"""
import os
import time

_HEX = frozenset("0123456789abcdef")
_last = [0, 0]  # (unix ms, 12-bit counter) of the previous id made by this process


def uuid7(now_ns: int | None = None) -> str:
    """A new UUIDv7 string; ids from one process are strictly increasing (RFC 9562 method 1)."""
    ms = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    counter = rand >> 68  # 12 random bits start each millisecond's counter
    if ms <= _last[0]:
        ms, counter = _last[0], _last[1] + 1
        if counter > 0xFFF:
            ms, counter = ms + 1, 0
    _last[0], _last[1] = ms, counter
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | rand & (1 << 62) - 1
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid7_derived(ms: int, name: bytes) -> str:
    """A UUIDv7 whose time is `ms` and whose other 74 bits are the SHA-256 of `name`: the same name and time
    give the same id everywhere (a schedule's fire time becomes one job id on every agent)."""
    from runkit.core.hashing import sha256

    rand = int.from_bytes(sha256(name)[:10], "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 68) << 64 | 0b10 << 62 | rand & (1 << 62) - 1
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def is_uuid(text: str) -> bool:
    """True for a canonical lower-case UUID string (8-4-4-4-12 hex digits)."""
    if len(text) != 36 or any(text[i] != "-" for i in (8, 13, 18, 23)):
        return False
    return set(text.replace("-", "")) <= _HEX


def is_uuid7(text: str) -> bool:
    return is_uuid(text) and text[14] == "7" and text[19] in "89ab"


def hyphenated(compact: str) -> str:
    """A prefix of an id's 32 hex digits, with the hyphens an id has at those places (8-4-4-4-12)."""
    out = []
    for i, c in enumerate(compact[:32]):
        if i in (8, 12, 16, 20):
            out.append("-")
        out.append(c)
    return "".join(out)
