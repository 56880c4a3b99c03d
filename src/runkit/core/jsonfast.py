"""json.dumps / json.loads through the C accelerator the json package itself uses, without importing
the json package: that pulls in re and enum, ~12 ms on every CLI and supervisor start (measured in
bench/). Output and errors match json's (compact separators, ASCII-only output).

`_json` is CPython's private module: if anything about it fails at import (missing, a changed
signature, output that is not json's), the json package is used instead, and so it is when
RUNKIT_JSON_FALLBACK is set to a non-empty value (`make test` runs part of the suite that way).
ACCELERATED says which one is in use.
"""
import os


def _constant(name: str):
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo = None


_WHITESPACE = " \t\n\r"


def _unserialisable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


try:
    import _json
except Exception:  # not CPython, or a broken build: the json package it is
    _json = None  # type: ignore[assignment]


def _accelerator():
    """(scanner, encoders) of the C module, checked on a small document; None to use the json package."""
    if _json is None or os.environ.get("RUNKIT_JSON_FALLBACK"):
        return None
    try:
        def encoder(sort_keys: bool):
            return _json.make_encoder(None, _unserialisable, _json.encode_basestring_ascii, None, ":", ",",
                                      sort_keys, False, True)

        scan, encoders = _json.make_scanner(_Context()), {False: encoder(False), True: encoder(True)}
        sample = '{"b":[1,2.5,null,true],"a":"\\u00e9\\""}'
        if scan(sample, 0) != ({"b": [1, 2.5, None, True], "a": 'é"'}, len(sample)):
            return None
        if "".join(encoders[True](scan(sample, 0)[0], 0)) != '{"a":"\\u00e9\\"","b":[1,2.5,null,true]}':
            return None
        return scan, encoders
    except Exception:  # anything at all: the json package is always right
        return None


_scan, _ENCODERS = _accelerator() or (None, None)
ACCELERATED = _scan is not None


def loads(text):
    """Parse a JSON document (str or UTF-8 bytes). Raises ValueError on anything else."""
    if _scan is None:
        import json

        return json.loads(text)
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")  # UnicodeDecodeError is a ValueError
    doc = text.strip(_WHITESPACE)
    try:
        value, end = _scan(doc, 0)
    except StopIteration as e:
        raise ValueError(f"not a JSON document (at character {e.value})") from None
    except SystemError:
        # The scanner reports syntax errors through json.decoder, which it does not import itself:
        # on this (rare) path, let the json package parse again and raise its JSONDecodeError.
        import json

        return json.loads(doc)
    if end != len(doc):
        raise ValueError(f"extra data after the JSON document (at character {end})")
    return value


def dumps(value, sort_keys: bool = False) -> str:
    """Compact JSON, as json.dumps(value, separators=(",", ":"), sort_keys=sort_keys) writes it."""
    if _ENCODERS is None:
        import json

        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)
    return "".join(_ENCODERS[bool(sort_keys)](value, 0))
