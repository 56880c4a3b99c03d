"""SHA-256 without loading OpenSSL: hashlib's import costs ~5 ms on every CLI and supervisor start."""


def sha256(data: bytes) -> bytes:
    try:
        from _sha256 import sha256 as impl  # type: ignore[import-not-found]  # CPython 3.11's builtin module
    except ImportError:
        try:
            from _sha2 import sha256 as impl  # type: ignore[import-not-found]  # CPython 3.12+
        except ImportError:
            from hashlib import sha256 as impl
    return impl(data).digest()
