"""stado's endpoint check is written by hand: urllib.parse costs every `stado submit` on a cloud store ~3.4 ms
of imports (5-6% of its start-up, measured against SeaweedFS; see objectstore/connect.py). It must say what
urllib.parse would say: an http(s) URL whose host is a name or an address, with a port in 1..65535 if any."""
import string

from hypothesis import given, strategies as st

from stado.objectstore.cloudconfig import _endpoint_ok

from tests.fuzzing import examples


def by_urllib(value) -> bool:
    """The reference: the same rule, read by urllib.parse."""
    if not isinstance(value, str) or any(c.isspace() or not c.isprintable() for c in value):
        return False
    from urllib.parse import urlsplit

    try:
        url = urlsplit(value)
        port = url.port  # ValueError: not a number, or out of range
    except ValueError:
        return False
    host = url.hostname or ""  # lower-cased, brackets of an IPv6 address removed
    host_port = url.netloc.rpartition("@")[2]
    if host_port.startswith("["):
        after = host_port.partition("]")[2]
        host_ok = all(c in "0123456789abcdef:." for c in host) and (not after or after.startswith(":"))
    else:
        host_ok = all(c.isalnum() or c in "-._" for c in host)
    return (url.scheme in ("http", "https") and bool(host) and host_ok and port != 0
            and not url.netloc.endswith(":"))  # a colon with no port


def _endpoints():
    scheme = st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "http:", "", "s3"])
    host = st.one_of(st.sampled_from(["127.0.0.1", "localhost", "s3.example.com", "a_b", "[::1]", "[fe80::1]", "[::1",
                                      "::1]", "[g::1]", "", "host.", "١٢٣", "a!b", "ho%st", "[::1]x", "@", "u:p@h"]),
                     st.text(alphabet=string.ascii_letters + string.digits + ".-_:[]@%!", max_size=10))
    port = st.one_of(st.just(""), st.integers(-2, 70000).map(lambda n: f":{n}"),
                     st.sampled_from([":", ":x", ":1x", ":١٢", ": 80", "::80"]))
    rest = st.sampled_from(["", "/", "/p/q", "?a=b", "#f", "/ x", "\t"])
    built = st.tuples(scheme, st.sampled_from(["://", ":/", "//", ":///"]), host, port, rest).map("".join)
    return st.one_of(built, st.text(max_size=30), st.integers(), st.none())


@examples(3000)
@given(_endpoints())
def test_the_hand_written_endpoint_check_agrees_with_urllib(value):
    assert _endpoint_ok(value) == by_urllib(value), value


def test_the_generator_reaches_both_answers():
    assert _endpoint_ok("http://127.0.0.1:8333") and _endpoint_ok("https://[::1]") and _endpoint_ok("http://u:p@h:1/x")
    assert not _endpoint_ok("http://h:65536") and not _endpoint_ok("http://[::1]x") and not _endpoint_ok("ftp://h")
    assert not _endpoint_ok("http://[@0")  # found by the property: a bracket in the user part
