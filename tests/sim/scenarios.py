from collections import namedtuple

Scenario = namedtuple("Scenario", "seed pinned about")
SCENARIOS: dict[str, Scenario] = {}
