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


# -- text redaction: what leaves the machine (uploaded output) never carries a secret ------------------

import re  # noqa: E402  (kept below the two functions above, which must stay import-free and unchanged)

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 6  # shorter values would mask ordinary words
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)([^/\s@]+)(@)")

# Common credential shapes. Each pattern's last group (or the whole match) is replaced.
_SHAPES = [
    re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?-----END[A-Z0-9 ]*PRIVATE KEY-----", re.S),
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
    re.compile(r"(?i)\b(aws_secret_access_key|aws_session_token|secret_access_key)(\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{16,})"),
    re.compile(r"(?i)\b(bearer)(\s+)([A-Za-z0-9\-._~+/]{8,}=*)"),
    re.compile(r"(?i)\b(authorization:\s*basic)(\s+)([A-Za-z0-9+/]{8,}=*)"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bglpat-[A-Za-z0-9\-_]{20,}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
    re.compile(r"\bAIza[0-9A-Za-z\-_]{35}\b"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\b[rs]k_live_[0-9A-Za-z]{16,}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)\b(AccountKey|SharedAccessKey|sig)(=)([A-Za-z0-9%+/=]{16,})"),
    re.compile(r"(?i)\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)[A-Z0-9_]*)"
               r"(\s*[=:]\s*[\"']?)([^\s\"']{6,})"),
]


def secret_values(env: dict[str, str]) -> list[str]:
    """Values that must never be shown: those of secret-looking names, and passwords inside URLs
    (proxies such as https_proxy=http://user:pass@host)."""
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    for v in env.values():
        for m in _URL_CREDENTIALS.finditer(v):
            if len(m.group(2)) >= 4:
                values.add(m.group(2))
    return sorted(values, key=len, reverse=True)  # longest first, so a value containing another goes whole


def _mask_match(m: re.Match) -> str:
    if m.re.groups >= 3:
        return m.group(1) + m.group(2) + REDACTED
    return REDACTED


def redact_text(text: str, secrets: list[str] = ()) -> str:
    """The text with the given secret values and common credential shapes (AWS keys, bearer tokens,
    private key blocks, GitHub/GitLab/Slack/Google tokens, JWTs, URL passwords, KEY=value pairs of
    secret-looking names) replaced by [REDACTED]."""
    for value in secrets:
        if value:
            text = text.replace(value, REDACTED)
    text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    for pattern in _SHAPES:
        text = pattern.sub(_mask_match, text)
    return text


class StreamRedactor:
    """Redacts a byte stream that arrives in pieces, so that no secret escapes by being split across two
    pieces: it releases text only up to the last complete line (or, for a very long line, all but a tail
    long enough to hold any secret), and holds an unterminated private-key block until its END line (a
    block longer than HOLD_BLOCK is replaced by [REDACTED] and dropped up to its END line)."""

    HOLD_LINE = 64 * 1024
    HOLD_BLOCK = 1024 * 1024
    _BLOCK_START = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----")
    _BLOCK_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY-----")

    def __init__(self, secrets: list[str] = ()):
        self.secrets = [s for s in secrets if s]
        self._tail = max([len(s) for s in self.secrets] + [512])
        self._pending = ""
        self._dropping = False  # inside an over-long private-key block

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """Redacted bytes that are safe to release now; `final` releases everything."""
        self._pending += data.decode("utf-8", "surrogateescape")
        out = []
        while True:
            text = self._pending
            if self._dropping:
                end = self._BLOCK_END.search(text)
                if end is None:
                    self._pending = "" if final else text[-64:]  # a tail that may hold half an END marker
                    break
                self._pending, self._dropping = text[end.end():], False
                continue
            cut = len(text) if final else self._safe_cut(text)
            start = self._open_block(text, cut)
            if start is not None:
                if final:
                    out.append(text[:start] + REDACTED + "\n")
                    self._pending = ""
                    break
                if len(text) - start > self.HOLD_BLOCK:
                    out.append(text[:start] + REDACTED + "\n")
                    self._pending, self._dropping = text[start + 10:], True
                    continue
                cut = start
            out.append(text[:cut])
            self._pending = text[cut:]
            break
        return redact_text("".join(out), self.secrets).encode("utf-8", "surrogateescape")

    def _safe_cut(self, text: str) -> int:
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) > self.HOLD_LINE:
            cut = len(text) - self._tail
        return cut

    def _open_block(self, text: str, cut: int) -> int | None:
        """Where a private-key block that has no END line yet begins, before `cut`."""
        for m in self._BLOCK_START.finditer(text, 0, max(cut, 0)):
            if not self._BLOCK_END.search(text, m.end()):
                return m.start()
        return None
