"""Redaction: the fast path agrees with the reference, and a stream never lets a secret out, whatever the
chunk boundaries, partial-line releases and skips."""
import random

import pytest

from runkit.core.redact import REDACTED, StreamRedactor, _redact_shapes, redact_text

FRAGMENTS = [
    "AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key", " = ", "=", ":", " ", "\n", "\n\n", "\t", '"', "'", "\r",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Authorization:", " Basic ", "Bearer", "eyJhbGciOiJIUzI1NiJ9", ".",
    "abcdefgh12345678", "ghp_0123456789abcdefghijABCDEFGHIJ012345", "github_pat_", "glpat-", "xoxb-",
    "1234567890-abcdefghij", "https://", "user", ":hunter22@", "example.com/", "DB_PASSWORD", "password", "PASSWD",
    "Token", "api_key", "ApiKey", "AccountKey", "SharedAccessKey", "sig", "%2Babc", "sk-", "rk_live_", "AIza",
    "0123456789abcdefghijklmnopqrstuvwxyzABC", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
    "MIIEpAIBAAKCAQEA", "tokens", "key", "épée", "█", "x", "_", "-", "\u017fecret", "\u212aey", "İ",
]


def test_the_fast_path_agrees_with_every_shape_applied_to_the_whole_text():
    rng = random.Random(8)
    for _ in range(30000):
        text = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 14)))
        assert redact_text(text) == _redact_shapes(text), text


def test_a_value_on_the_line_after_its_name_is_still_found():
    assert "hunter2hunter2" not in redact_text("ok\nDB_PASSWORD =\n\n  hunter2hunter2\nnext\n")
    assert "dXNlcjpwYXNzd29yZA" not in redact_text("Authorization:\n\n Basic dXNlcjpwYXNzd29yZA==\n")


SECRET = "the-agent-secret-42"
STREAM = (f"line one\nvalue {SECRET} tail\nexport DB_PASSWORD=correct-horse-battery\n"
          "curl -H 'Authorization: Bearer abcdef1234567890xyz' https://user:hunter22@example.com/x\n"
          "key AKIAIOSFODNN7EXAMPLE and ghp_0123456789abcdefghijABCDEFGHIJ012345 done\n"
          "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
          f"no newline at the end {SECRET[:7]}")
LEAKS = [SECRET, "correct-horse-battery", "abcdef1234567890xyz", "hunter22", "AKIAIOSFODNN7EXAMPLE",
         "ghp_0123456789abcdef", "MIIEpAIBAAKCAQEA"]


def _stream(pieces, release_after_each=False, secrets=(SECRET,)) -> bytes:
    redactor = StreamRedactor(list(secrets))
    out = []
    for piece in pieces:
        out.append(redactor.feed(piece))
        if release_after_each:
            out.append(redactor.release_partial())
    out.append(redactor.feed(b"", final=True))
    return b"".join(out)


@pytest.mark.parametrize("release", [False, True], ids=["lines", "partial-releases"])
def test_a_secret_split_at_any_chunk_boundary_never_escapes(release):
    data = STREAM.encode()
    whole = _stream([data])
    for cut in range(1, len(data)):
        out = _stream([data[:cut], data[cut:]], release_after_each=release)
        for leaked in LEAKS:
            assert leaked.encode() not in out, (cut, leaked, out)
        if not release:
            assert out == whole


def test_a_secret_fed_one_byte_at_a_time_with_releases_never_escapes():
    data = STREAM.encode()
    out = _stream([data[i:i + 1] for i in range(len(data))], release_after_each=True)
    for leaked in LEAKS:
        assert leaked.encode() not in out
    assert b"line one\nvalue [REDACTED] tail\n" in out and out.endswith(b"no newline at the end the-age")


def test_a_partial_line_is_released_but_for_what_could_start_a_secret():
    redactor = StreamRedactor([SECRET])
    assert redactor.feed(b"fetching model.bin ... 42%\r") == b""
    assert redactor.release_partial() == b"fetching model.bin ... 42%\r"
    redactor.feed(b"downloading ... export GH_TOKEN=ghp_01234")
    assert redactor.release_partial() == b"downloading ... export "
    assert redactor.feed(b"56789abcdefghijABCDEFGHIJ012345 ok\n") == f"GH_TOKEN={REDACTED} ok\n".encode()
    redactor.feed(b"almost " + SECRET[:5].encode())
    assert redactor.release_partial() == b"almost "
    assert redactor.feed(SECRET[5:].encode() + b"\n") == f"{REDACTED}\n".encode()
    redactor.feed(b"Authorization: Bas")
    assert redactor.release_partial() == b""
    assert redactor.feed(b"ic dXNlcjpwYXNzd29yZA==\n") == f"Authorization: Basic {REDACTED}\n".encode()


def test_after_a_skip_the_broken_line_and_a_key_block_cut_in_two_are_dropped():
    redactor = StreamRedactor()
    assert redactor.feed(b"start\n") == b"start\n"
    redactor.skip()
    out = redactor.feed(b"KCAQEAsecretbody\nMIIsecondline\n-----END RSA PRIVATE KEY-----\nafter\n")
    assert out == f"{REDACTED}\nafter\n".encode()
    assert redactor.discarded == len(b"KCAQEAsecretbody\n")
    redactor.skip()
    assert redactor.feed(b"tail of a line\nplain text\n", final=True) == b"plain text\n"
