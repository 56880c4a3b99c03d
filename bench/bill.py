"""What stado's requests cost in money: list prices per request kind for S3, GCS and Azure Blob, and the bill of
a job that runs once, of a running job-hour and of an idle agent-month from requests counted on the wire
(bench/stado_requests.py measures them; this turns them into dollars).

The prices are the providers' published list prices for their standard tiers in a US region, as read on the date
below; a request kind a provider does not charge is 0. Update PRICES (and PRICES_AS_OF) when they change.
"""
PRICES_AS_OF = "2026-12-04"
PER_1000 = 1 / 1000
# Dollars per request. S3 Standard (us-east-1): PUT, COPY, POST, LIST $0.005 per 1,000; GET, HEAD and the rest
# $0.0004 per 1,000; DELETE free. GCS Standard (a US region): class A (insert, list, compose) $0.005 per 1,000,
# class B (get, metadata) $0.0004 per 1,000; DELETE free. Azure Blob Hot (LRS): writes and lists $0.055 per
# 10,000, reads and the rest $0.0044 per 10,000; DELETE free.
PRICES = {
    "S3": {"PUT": 0.005 * PER_1000, "POST": 0.005 * PER_1000, "LIST": 0.005 * PER_1000,
           "GET": 0.0004 * PER_1000, "HEAD": 0.0004 * PER_1000, "DELETE": 0.0},
    "GCS": {"PUT": 0.005 * PER_1000, "POST": 0.005 * PER_1000, "LIST": 0.005 * PER_1000,
            "GET": 0.0004 * PER_1000, "HEAD": 0.0004 * PER_1000, "DELETE": 0.0},
    "Azure": {"PUT": 0.0055 * PER_1000, "POST": 0.0055 * PER_1000, "LIST": 0.0055 * PER_1000,
              "GET": 0.00044 * PER_1000, "HEAD": 0.00044 * PER_1000, "DELETE": 0.0},
}
PROVIDERS = tuple(PRICES)
HOUR, MONTH = 3600.0, 30 * 86400.0
# What the defaults aim for on S3 (and how each figure is scaled from what was counted).
GOALS = {"running": 0.001, "idle": 0.50}


def dollars(counts: dict, provider: str) -> float:
    """The price of `counts` ({kind: requests}) at `provider`'s list prices."""
    prices = PRICES[provider]
    return sum(n * prices.get(kind, 0.0) for kind, n in counts.items())


def scaled(counts: dict, factor: float) -> dict:
    return {kind: n * factor for kind, n in counts.items()}


def bill(once: dict | None, running: tuple[dict, float] | None, idle: tuple[dict, float] | None) -> list[dict]:
    """The three figures: requests by kind and dollars per provider, each for its unit. `once`: the requests of
    one job, submit to a reader seeing it terminal; `running`, `idle`: (requests counted, over how many seconds)."""
    rows = []
    if once is not None:
        rows.append({"figure": "once", "unit": "per million jobs", "counts": scaled(once, 1e6)})
    if running is not None:
        counts, seconds = running
        rows.append({"figure": "running", "unit": "per job-hour", "counts": scaled(counts, HOUR / seconds)})
    if idle is not None:
        counts, seconds = idle
        rows.append({"figure": "idle", "unit": "per agent-month", "counts": scaled(counts, MONTH / seconds)})
    for row in rows:
        row["dollars"] = {p: dollars(row["counts"], p) for p in PROVIDERS}
    return rows


def money(x: float) -> str:
    return f"${x:.2f}" if x >= 1 else f"${x:.4f}" if x >= 0.0001 else f"${x:.6f}"


def table(rows: list[dict], kinds: tuple) -> list[tuple]:
    return [(row["figure"], row["unit"], *(f"{row['counts'].get(k, 0):,.0f}" for k in kinds),
             *(money(row["dollars"][p]) for p in PROVIDERS)) for row in rows]


def script_lines(rows: list[dict]) -> list[str]:
    """The three lines for scripts, at S3's prices: `dollars once: $X per million jobs`, ..."""
    return [f"dollars {row['figure']}: {money(row['dollars']['S3'])} {row['unit']}" for row in rows]
