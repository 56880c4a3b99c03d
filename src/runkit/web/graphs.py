"""A pipeline's graph for a dashboard: many same-shaped siblings (a sweep: jobs with the same dependencies and the
same dependents) fold into one summary node that counts its members by state, so a sweep of 2,000 is one node
and the graph stays readable. Plain data in and out: nodes {"id", "state", ...}, edges {"from", "to",
"condition"}."""
from collections import Counter

FOLD_AT = 5  # siblings of one shape folded into a summary from this many


def collapse(nodes: list[dict], edges: list[dict], keep: str | None = None, least: int = FOLD_AT) -> dict:
    """{"nodes", "edges"}: the graph with every set of at least `least` same-shaped nodes (the same edges in, the
    same edges out, conditions included) folded into one {"id": "sweep:<first member>", "sweep": True, "count",
    "states": {state: n}, "members": [their ids], "name": what their names share}; `keep` (the job the graph was
    asked for) is never folded away."""
    ins: dict[str, list] = {n["id"]: [] for n in nodes}
    outs: dict[str, list] = {n["id"]: [] for n in nodes}
    for e in edges:
        outs.setdefault(e["from"], []).append((e["to"], e["condition"]))
        ins.setdefault(e["to"], []).append((e["from"], e["condition"]))
    shapes: dict[tuple, list[dict]] = {}
    for n in nodes:
        shape = (tuple(sorted(ins[n["id"]])), tuple(sorted(outs[n["id"]])))
        shapes.setdefault(shape, []).append(n)
    into: dict[str, str] = {}
    summaries = []
    for members in shapes.values():
        members = [m for m in members if m["id"] != keep]
        if len(members) < least:
            continue
        sid = "sweep:" + members[0]["id"]
        for m in members:
            into[m["id"]] = sid
        summaries.append({"id": sid, "sweep": True, "count": len(members), "name": _shared([m.get("name") or ""
                          for m in members]), "states": dict(Counter(m["state"] for m in members)),
                          "members": [m["id"] for m in members], "in_view": True})
    kept = [n for n in nodes if n["id"] not in into] + summaries
    seen, folded = set(), []
    for e in edges:
        key = (into.get(e["from"], e["from"]), into.get(e["to"], e["to"]), e["condition"])
        if key not in seen:
            seen.add(key)
            folded.append({"from": key[0], "to": key[1], "condition": key[2]})
    return {"nodes": kept, "edges": folded}


def _shared(names: list[str]) -> str:
    """What the names begin with in common, as `train-*` (or `` when nothing)."""
    if not names:
        return ""
    first, last = min(names), max(names)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n] + "*" if n else ""
