"""Retry policy (pure): is an attempt's end retryable, and how long to wait before the next one."""
from runkit.core.durations import MAX_DURATION


def is_retryable(policy: dict, attempt: int, exit_code: int | None, signal: int | None, timed_out: bool) -> bool:
    """Whether attempt number `attempt` (1-based) ending this way earns another attempt.

    policy: {"retries": N more attempts, "exit_codes": [codes] or None (= any non-zero exit),
             "on_timeout": bool}. A spawn failure (no exit code, no signal) is never retried.
    """
    if attempt > policy.get("retries", 0):
        return False
    if timed_out:
        return bool(policy.get("on_timeout"))
    if exit_code is not None:
        if exit_code == 0:
            return False
        codes = policy.get("exit_codes")
        return codes is None or exit_code in codes
    return signal is not None and policy.get("exit_codes") is None


def retry_delay(policy: dict, attempt: int) -> float:
    """Seconds to wait after attempt `attempt` failed, before attempt + 1 starts."""
    delay = float(policy.get("delay", 0.0))
    if policy.get("backoff") == "exponential":
        delay *= 2.0 ** min(attempt - 1, 64)  # a long run of retries must not overflow
        cap = policy.get("max_delay")
        if cap is not None:
            delay = min(delay, float(cap))
    return min(delay, MAX_DURATION)
