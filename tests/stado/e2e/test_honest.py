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
