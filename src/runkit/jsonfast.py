"""json.dumps / json.loads through the C accelerator the json package itself uses, without importing
the json package: that pulls in re and enum, ~12 ms on every CLI and supervisor start (measured in
bench/). Output and errors match json's (compact separators, ASCII-only output); where the C module
is missing, the json package is used instead.
"""
try:
    import _json
except ImportError:  # not CPython: use the real thing
    _json = None


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
_scan = _json.make_scanner(_Context()) if _json else None


def loads(text):
    """Parse a JSON document (str or UTF-8 bytes). Raises ValueError on anything else."""
    if _json is None:
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


def _unserialisable(value):
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encoder(sort_keys: bool):
    return _json.make_encoder(None, _unserialisable, _json.encode_basestring_ascii, None, ":", ",", sort_keys,
                              False, True)


_ENCODERS = {False: _encoder(False), True: _encoder(True)} if _json else None


def dumps(value, sort_keys: bool = False) -> str:
    """Compact JSON, as json.dumps(value, separators=(",", ":"), sort_keys=sort_keys) writes it."""
    if _json is None:
        import json

        return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)
    return "".join(_ENCODERS[bool(sort_keys)](value, 0))
