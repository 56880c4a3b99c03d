"""Keeping secrets out of what is shown or uploaded."""

SECRET_MARKERS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL")
MASK = "****"


def is_secret_name(name: str) -> bool:
    """An environment variable whose name looks like it holds a secret (API_KEY, GH_TOKEN, ...)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def mask_env(env: dict[str, str]) -> dict[str, str]:
    """The same mapping with the values of secret-looking names masked."""
    return {k: (MASK if is_secret_name(k) and v else v) for k, v in env.items()}
