"""A scripted stand-in for a job's process, shared by jobman's and stado's in-process tiers: its command's words say
how it behaves (`run SECONDS`, `exit CODE`, `ignore-term`), and the tier's fake host advances it on a manual clock."""


class ScriptedProcess:
    def __init__(self, pid: int, words: list[str], env: dict, started: float):
        self.pid, self.env, self.started = pid, env, started
        self.runs = float(words[1]) if words[:1] == ["run"] and len(words) > 1 else 1.0
        self.exit_code = int(words[words.index("exit") + 1]) if "exit" in words else 0
        self.ignores_term = "ignore-term" in words
        self.ends = started + self.runs
        self.signal: int | None = None
        self.signals: list[int] = []
        self.reaped = False

    def alive(self, now: float) -> bool:
        return now < self.ends
