"""runkit.core.jsonfast must agree with the json package, output and errors alike."""
import json
import random

import pytest

from runkit.core import jsonfast

SAMPLES = [
    {"argv": ["sh", "-c", "echo \"hi\" \\ there\n\t"], "env": {"A": "\u00e9\u4e2d\ud83d\ude00", "B": ""}},
    {"env": {"UNDECODABLE": "\udcff\udc80"}},  # os.environ's surrogate escapes survive a round trip
    [1, -2, 3.5, 1e-300, 10**40, None, True, False, [], {}],
    "just a string", 0, -0.0,
]


@pytest.mark.parametrize("value", SAMPLES)
def test_same_output_and_round_trip(value):
    text = jsonfast.dumps(value)
    assert text == json.dumps(value, separators=(",", ":"))
    assert jsonfast.dumps(value, sort_keys=True) == json.dumps(value, separators=(",", ":"), sort_keys=True)
    assert jsonfast.loads(text) == json.loads(text)
    assert jsonfast.loads(text.encode()) == json.loads(text)


def test_random_documents_agree():
    rng = random.Random(7)

    def make(depth):
        kind = rng.randrange(7 if depth < 4 else 4)
        if kind == 0:
            return rng.randrange(-10**6, 10**6)
        if kind == 1:
            return rng.random() * 10 ** rng.randrange(-5, 5)
        if kind == 2:
            return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x2FFF)])) for _ in range(8))
        if kind == 3:
            return rng.choice([None, True, False])
        if kind in (4, 5):
            return [make(depth + 1) for _ in range(rng.randrange(4))]
        return {f"k{i}{make(9)}": make(depth + 1) for i in range(rng.randrange(4))}

    for _ in range(300):
        value = make(0)
        text = jsonfast.dumps(value)
        assert text == json.dumps(value, separators=(",", ":"))
        assert jsonfast.loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "[1,]", '{"a":}', "nul", '"\x01"', b"\xff", "{not json",
                                  '{"argv": 17'])
def test_errors_are_value_errors(text):
    with pytest.raises(ValueError):
        jsonfast.loads(text)
    with pytest.raises(ValueError):
        json.loads(text)


def test_unserialisable_is_a_type_error():
    with pytest.raises(TypeError):
        jsonfast.dumps({"x": object()})


def test_errors_without_the_json_package_loaded():
    """The C scanner reports errors through json.decoder; in a fresh process that is not loaded yet."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from runkit.core import jsonfast\n"
            "assert 'json' not in sys.modules\n"
            "print(jsonfast.dumps(jsonfast.loads('{\"a\": [1, 2]}')))\n"
            "assert 'json' not in sys.modules\n"
            "try:\n"
            "    jsonfast.loads('{not json')\n"
            "except ValueError as e:\n"
            "    print('ValueError', type(e).__name__)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_accelerated())
    assert result.stdout == '{"a":[1,2]}\nValueError JSONDecodeError\n'


def _accelerated() -> dict:
    """This environment without RUNKIT_JSON_FALLBACK (make test runs this file once with it set)."""
    import os

    return {k: v for k, v in os.environ.items() if k != "RUNKIT_JSON_FALLBACK"}


_PROBE = """import sys
{prelude}
from runkit.core import jsonfast
text = jsonfast.dumps(jsonfast.loads(sys.argv[1]))
print(jsonfast.ACCELERATED, 'json' in sys.modules, text)
try:
    jsonfast.loads('[1,]')
except ValueError:
    print('refused')
"""
_DOCUMENT = ' [1, "\\u00e9"] '  # what the probe reads and writes back: [1,"\u00e9"]


def _probe(env: dict, prelude: str = "") -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", _PROBE.format(prelude=prelude), _DOCUMENT], capture_output=True,
                          text=True, check=True, env=env).stdout


def test_the_accelerator_is_used_unless_the_fallback_is_forced():
    assert _probe(_accelerated()) == 'True False [1,"\\u00e9"]\nrefused\n'
    assert _probe({**_accelerated(), "RUNKIT_JSON_FALLBACK": "1"}) == 'False True [1,"\\u00e9"]\nrefused\n'


@pytest.mark.parametrize("prelude", [
    "sys.modules['_json'] = None",  # the module is missing: ImportError
    "import types; sys.modules['_json'] = types.ModuleType('_json')",  # it has no make_scanner: AttributeError
    # (json, imported first, keeps the real functions: the json package stays right when runkit's use fails)
    "import json, _json; _json.make_encoder = lambda *a: lambda v, i: iter(['wrong'])",  # it writes something else
    "import json, _json; _json.make_scanner = lambda ctx: 1 / 0",  # it fails in a way nobody foresaw
])
def test_any_failure_of_the_private_module_at_import_falls_back_to_json(prelude):
    assert _probe(_accelerated(), prelude) == 'False True [1,"\\u00e9"]\nrefused\n'
