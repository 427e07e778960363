"""The one backoff rule of every HTTP client here (cloud prices, Kubernetes, image pulls)."""


def backoff_delay(attempt: int, base: float, cap: float, retry_after: str = "") -> float:
    """Seconds to wait before retry number `attempt` (0 first): `base` doubled per attempt,
    at least a numeric Retry-After, never more than `cap`."""
    delay = base * (2**attempt)
    retry_after = retry_after.strip()
    if retry_after.isdigit():
        delay = max(delay, float(retry_after))
    return float(min(cap, delay))
