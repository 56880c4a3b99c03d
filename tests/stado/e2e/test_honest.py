"""Honest errors and a safe terminal in stado (issue 23): corrupt schedules, endpoints that cannot work,
other people's text escaped on the terminal."""
import json

import pytest

from .support import stado

FILE_ONLY = pytest.mark.parametrize("store_target", ["file"], indirect=True)


@FILE_ONLY
def test_a_corrupt_schedule_is_reported_beside_the_healthy_ones_and_removable(stado_env, store):
    stado(stado_env, "schedule", "add", "good", "0 3 * * *", "--", "make", "all")
    store.put("schedules/broken.json", b"{not json")
    store.put("schedules/odd.json", json.dumps({"name": "odd"}).encode())  # JSON, but no cron nor spec
    listed = stado(stado_env, "schedule", "list")
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("good  0 3 * * * (UTC)") and lines[0].endswith("make all"), listed.stdout
    assert any(line.startswith("problem: schedules/broken.json: corrupt document") and
               "`stado schedule rm broken` removes it" in line for line in lines), listed.stdout
    assert any("schedules/odd.json" in line and "`stado schedule rm odd` removes it" in line for line in lines)
    shown = json.loads(stado(stado_env, "schedule", "list", "--json").stdout)
    assert [s["name"] for s in shown["schedules"]] == ["good"] and len(shown["problems"]) == 2
    paused = stado(stado_env, "schedule", "pause", "broken", ok=False)
    assert paused.returncode == 1 and "`stado schedule rm broken` removes it" in paused.stderr
    assert len(paused.stderr.strip().splitlines()) == 1
    for name in ("broken", "odd"):
        assert stado(stado_env, "schedule", "rm", name).stdout.startswith(f"corrupt schedule document {name} removed")
    assert [e.key for e in store.list("schedules/")] == ["schedules/good.json"]
    assert json.loads(stado(stado_env, "schedule", "list", "--json").stdout)["problems"] == []
    assert stado(stado_env, "schedule", "rm", "good").stdout.startswith("schedule good removed")


class _Site:
    """A plain web server (Python's own), serving a directory: something that answers HTTP but is no store."""

    def __init__(self, root):
        import functools
        import http.server
        import threading

        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
        handler.log_message = lambda *a, **k: None
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@FILE_ONLY
@pytest.mark.parametrize("url, path", [("s3://site/q", ""), ("az://site/q", "/devstoreaccount1")])
def test_a_plain_web_server_as_the_endpoint_is_not_an_object_store(stado_env, tmp_path, url, path):
    root = tmp_path / "www"
    root.mkdir()
    site = _Site(root)
    try:
        config = tmp_path / "web.toml"
        config.write_text(f'[store]\nurl = "{url}"\nendpoint = "{site.endpoint}{path}"\nallow_http = true\n'
                          'max_retries = 0\n' + ('region = "us-east-1"\n' if url.startswith("s3") else "emulator = true\n"))
        env = {**stado_env, "STADO_CONFIG": str(config), "AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}
        for args in (["status"], ["submit", "true"], ["schedule", "list"], ["agent", "--until-idle", "--work-root",
                                                                            str(tmp_path / "w")]):
            got = stado(env, *args, ok=False)
            assert got.returncode == 4, (args, got.stderr)
            assert "is not an object store (" in got.stderr and "check the endpoint in STADO_CONFIG" in got.stderr
            assert len(got.stderr.strip().splitlines()) == 1, got.stderr
        (root / "site").mkdir()  # now the listing's path exists: the server answers 200 with an HTML page
        got = stado(env, "status", ok=False)
        assert got.returncode == 4 and "is not an object store" in got.stderr, got.stderr
        assert len(list(root.rglob("*"))) == 1  # nothing was written there
    finally:
        site.close()
