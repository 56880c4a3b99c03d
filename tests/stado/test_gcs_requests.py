"""GCS's conditional-write rules. No local GCS server works with obstore, so: the pure request builder,
and what obstore then puts on the wire, recorded by a plain HTTP listener on 127.0.0.1."""
import http.server
import threading
from urllib.parse import unquote

import pytest

from stado.objectstore import AlreadyExists, PreconditionFailed, Version, open_store
from stado.objectstore.cloud import update_mode, version_from_meta


def test_gcs_update_carries_the_generation_as_version():
    assert update_mode("gcs", Version('"CJjk"', "1700000000123456")) == {"e_tag": '"CJjk"',
                                                                        "version": "1700000000123456"}
    assert update_mode("gcs", Version(None, "42")) == {"version": "42"}


@pytest.mark.parametrize("generation", [None, "", "abc", "-1"])
def test_gcs_update_without_a_usable_generation_is_a_failed_precondition(generation):
    with pytest.raises(PreconditionFailed, match="generation"):
        update_mode("gcs", Version('"CJjk"', generation))


def test_s3_and_azure_updates_carry_only_the_fields_that_are_set():
    # obstore raises TypeError for a None inside UpdateVersion, so absent fields are left out.
    assert update_mode("s3", Version('"md5"', None)) == {"e_tag": '"md5"'}
    assert update_mode("azure", Version('"0x8D"', None)) == {"e_tag": '"0x8D"'}
    assert update_mode("s3", Version('"md5"', "v1")) == {"e_tag": '"md5"', "version": "v1"}
    with pytest.raises(PreconditionFailed):
        update_mode("s3", Version(None, None))


def test_version_from_meta_keeps_the_generation_and_one_etag_spelling():
    assert version_from_meta({"e_tag": '"CJjk"', "version": "17"}) == Version('"CJjk"', "17")
    assert version_from_meta({"e_tag": "0x8D", "version": None}) == Version('"0x8D"', None)
    assert version_from_meta({"e_tag": 'W/"weak"'}) == Version('W/"weak"', None)
    assert version_from_meta({"e_tag": None, "version": 17}) == Version(None, "17")


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers PUTs as GCS's XML API does for preconditions: x-goog-if-generation-match must equal the
    object's generation (0: must not exist), else 412. It keeps one generation per path."""

    generations: dict[str, int]
    requests: list

    def do_PUT(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        condition = self.headers.get("x-goog-if-generation-match")
        self.requests.append((self.path, condition))
        current = self.generations.get(self.path, 0)
        if condition is not None and int(condition) != current:
            self.send_response(412)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.generations[self.path] = current + 1000
        self.send_response(200)
        self.send_header("ETag", f'"etag-{current + 1000}"')
        self.send_header("x-goog-generation", str(current + 1000))
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    handler = type("Handler", (Recorder,), {"generations": {}, "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    server.server_close()


def test_gcs_conditional_writes_on_the_wire(recorder):
    server, handler = recorder
    # A static bearer token: obstore must not look for cloud credentials (a metadata server) in a test.
    store = open_store("gs://bucket/prefix", {"endpoint": f"http://127.0.0.1:{server.server_port}", "allow_http": True, "max_retries": 0},
                       env={"GOOGLE_BEARER_TOKEN": "test-token"})
    created = store.put_if_absent("running/j1.json", b"{}")
    assert created == Version('"etag-1000"', "1000")
    with pytest.raises(AlreadyExists):
        store.put_if_absent("running/j1.json", b"{}")
    renewed = store.put_if_match("running/j1.json", b"{}", created)
    assert renewed.generation == "2000"
    with pytest.raises(PreconditionFailed):
        store.put_if_match("running/j1.json", b"{}", created)
    sent = len(handler.requests)
    with pytest.raises(PreconditionFailed):  # refused before any request: GCS cannot condition on an ETag
        store.put_if_match("running/j1.json", b"{}", Version(renewed.etag, None))
    assert len(handler.requests) == sent
    assert [condition for _, condition in handler.requests] == ["0", "0", "1000", "1000"]
    assert {unquote(path) for path, _ in handler.requests} == {"/bucket/prefix/running/j1.json"}
