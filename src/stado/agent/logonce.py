"""Saying a thing once: a long-lived agent meets the same corrupt key, the same paused queue, the same job that
does not fit, on every pass, and its log says each once (again when it changes).

Only that: a bounded map from what was said to the value it was said about. It is never asked what the agent
knows (QueueKnowledge keeps that, keyed by version and pruned with the listing), so forgetting an old entry costs
at most a line said twice.
"""

LIMIT = 4096  # entries kept; the oldest said goes first (an agent seeing more distinct problems repeats some)


class LogOnce:
    __slots__ = ("_log", "_said", "limit")

    def __init__(self, log, limit: int = LIMIT):
        self._log, self.limit = log, limit
        self._said: dict[str, object] = {}

    def __call__(self, key: str, value: object, message: str) -> None:
        """Log `message` unless `key` was last said about this very `value`."""
        if key in self._said and self._said[key] == value:
            return
        self._said.pop(key, None)
        self._said[key] = value
        while len(self._said) > self.limit:
            del self._said[next(iter(self._said))]
        self._log(message)

    def forget(self, key: str) -> None:
        """The thing is over (the queue resumed, the clock is good again): say it again if it comes back."""
        self._said.pop(key, None)

    def __len__(self) -> int:
        return len(self._said)
