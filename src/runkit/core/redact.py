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
_SHAPES = [re.compile(shape) for shape in (
    r"(?s)-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?-----END[A-Z0-9 ]*PRIVATE KEY-----",
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b",
    r"(?i)\b(aws_secret_access_key|aws_session_token|secret_access_key)(\s*[:=]\s*[\"']?)([A-Za-z0-9/+=]{16,})",
    r"(?i)\b(bearer)(\s+)([A-Za-z0-9\-._~+/]{8,}=*)",
    r"(?i)\b(authorization:\s*basic)(\s+)([A-Za-z0-9+/]{8,}=*)",
    r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
    r"\bglpat-[A-Za-z0-9\-_]{20,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
    r"\bAIza[0-9A-Za-z\-_]{35}\b",
    r"\bsk-[A-Za-z0-9_-]{20,}\b",
    r"\b[rs]k_live_[0-9A-Za-z]{16,}\b",
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"(?i)\b(AccountKey|SharedAccessKey|sig)(=)([A-Za-z0-9%+/=]{16,})",
    r"(?i)\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY)[A-Z0-9_]*)"
    r"(\s*[=:]\s*[\"']?)([^\s\"']{6,})",
)]


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


def _mask_url(m: re.Match) -> str:
    return m.group(1) + REDACTED + m.group(3)


# Every shape, in the order they are applied, each with how its match is masked.
_ORDERED = [(_URL_CREDENTIALS, _mask_url)] + [(pattern, _mask_match) for pattern in _SHAPES]
_EVERY = (1 << len(_ORDERED)) - 1


def _redact_shapes(text: str, shapes: int = _EVERY) -> str:
    """The shapes in the bit set `shapes` (all by default) applied to the whole text, in order. With all
    of them, this is the reference the fast path (redact_text) must agree with."""
    for i, (pattern, mask) in enumerate(_ORDERED):
        if shapes >> i & 1:
            text = pattern.sub(mask, text)
    return text


def _bits(*shapes: int) -> int:
    return sum(1 << i for i in shapes)


# Finders: cheap scans, each starting with a literal (which the re engine searches for quickly), such that
# every match of a shape contains a match of one of its finders. Only the lines a finder hits are searched,
# and only with its shapes (bits of _ORDERED: 0 URL password, 1 key block, 2 AWS key id, 3 AWS secret,
# 4 bearer, 5 basic, 6-13 token shapes, 14 Azure keys and SAS sig, 15 NAME=value), so ordinary output
# costs about one fast scan per finder (none for a finder whose required punctuation the text lacks). The case-insensitive shapes are found in the lower-cased text
# (same length; see _folded). A shape's replacement holds no finder's literal, so applying only the
# shapes a line's finders name gives what applying all of them would.
_FOLDED_FINDERS = [(re.compile(f), bits, needs) for f, bits, needs in (
    (r"://[^/\s:@]+:[^/\s@]+@", _bits(0), ":"),
    (r"pass(?:word|wd)[a-z0-9_]*\s*[=:]", _bits(15), "=:"), (r"secret[a-z0-9_]*\s*[=:]", _bits(3, 15), "=:"),
    (r"token[a-z0-9_]*\s*[=:]", _bits(3, 15), "=:"),
    (r"key[a-z0-9_]*\s*[=:]", _bits(3, 14, 15), "=:"),           # *_KEY=, AccountKey=, SharedAccessKey=
    (r"bearer\s+[a-z0-9\-._~+/]{8}", _bits(4), ""), (r"basic\s+[a-z0-9+/]{8}", _bits(5), ""),
    (r"gh[pousr]_[a-z0-9]{20}", _bits(6), "_"), (r"github_pat_[a-z0-9_]{20}", _bits(7), "_"),
    (r"glpat-[a-z0-9\-_]{20}", _bits(8), "-"), (r"xox[abposr]-", _bits(9), "-"),
    (r"aiza[0-9a-z\-_]{35}", _bits(10), ""), (r"sk-[a-z0-9_-]{20}", _bits(11), "-"),
    (r"k_live_[0-9a-z]{16}", _bits(12), "_"), (r"eyj[a-z0-9_-]{8,}\.eyj", _bits(13), "."), (r"sig=", _bits(14), "="),
)]
_EXACT_FINDERS = [(re.compile(r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z0-9]{16}"), _bits(2), "")]
_SEPARATORS = re.compile(r"[\s\"']*")
# Characters that re's IGNORECASE matches to an ASCII letter but str.lower() does not turn into one
# (U+0130 also changes length): text holding one takes the reference path.
_ODD_CASE = ("\u0130", "\u0131", "\u017f")


def _folded(text: str) -> str | None:
    if not text.isascii() and any(c in text for c in _ODD_CASE):
        return None
    return text.lower()


def _spans(text: str, folded: str) -> list[tuple[int, int, int]]:
    """Merged (start, end, shapes) line ranges that hold every possible match of a shape, with the bit set
    of the shapes that may match there."""
    present = {c for c in "=:_-." if c in folded}  # a finder that needs a character absent here is skipped
    hits = [(*m.span(), bits) for f, bits, needs in _FOLDED_FINDERS if not needs or present.intersection(needs)
            for m in f.finditer(folded)]
    hits += [(*m.span(), bits) for f, bits, _ in _EXACT_FINDERS for m in f.finditer(text)]
    if not hits:
        return []
    widened = []
    for start, end, bits in hits:
        # A shape's \s may cross line ends (a value on the line after `PASSWORD=`, `Authorization:` on the
        # line before `Basic`): widen over separators both ways, then to whole lines.
        end = _SEPARATORS.match(text, end).end()  # type: ignore[union-attr]  # it matches the empty string too
        end = text.find("\n", end)
        while start and text[start - 1].isspace():
            start -= 1
        widened.append((text.rfind("\n", 0, start) + 1, len(text) if end < 0 else end, bits))
    spans: list[tuple[int, int, int]] = []
    for start, end, bits in sorted(widened):
        if spans and start <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]), spans[-1][2] | bits)
        else:
            spans.append((start, end, bits))
    return spans


def redact_text(text: str, secrets: "list[str] | tuple[()]" = ()) -> str:
    """The text with the given secret values and common credential shapes (AWS keys, bearer tokens,
    private key blocks, GitHub/GitLab/Slack/Google tokens, JWTs, URL passwords, KEY=value pairs of
    secret-looking names) replaced by [REDACTED]."""
    for value in secrets:
        if value and value in text:
            text = text.replace(value, REDACTED)
    folded = _folded(text)
    if folded is None or "-----BEGIN" in text:  # rare: a private key block may span any number of lines
        return _redact_shapes(text)
    spans = _spans(text, folded)
    if not spans:
        return text
    out, at = [], 0
    for start, end, shapes in spans:
        out += [text[at:start], _redact_shapes(text[start:end], shapes)]
        at = end
    out.append(text[at:])
    return "".join(out)


# Literals one of which every shape's match contains (in the lower-cased text), and the run after one that
# a match may still be growing into: separators and at most two tokens (`Authorization: Basic dXNl`).
_TRIGGERS = ("://", "pass", "secret", "token", "key", "bearer", "basic", "authorization", "ghp_", "gho_", "ghu_",
             "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "aiza", "sk-", "k_live_", "eyj", "sig=",
             "akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa")
_OPEN_AFTER = re.compile(r"[\s=:\"']*+[^\s\"']*+(?:\s++[^\s\"']*+)?\Z")  # possessive: linear time
_BEGIN = "-----begin"
_WORDISH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+.-")


class StreamRedactor:
    """Redacts a byte stream that arrives in pieces, so that no secret escapes by being split across two
    pieces. feed() releases text up to the last complete line (or, for a very long line, all but a tail
    long enough to hold any secret), and holds an unterminated private-key block until its END line (a
    block longer than HOLD_BLOCK is replaced by [REDACTED] and dropped up to its END line).
    release_partial() gives out the unterminated last line too, except the bytes that could be the start
    of a secret (a prefix of a known secret value, or a credential shape that may still be growing).
    skip() tells it the stream jumped forward (bytes dropped unread): what follows starts mid-line, and
    maybe inside a private key block, so the first partial line is discarded and an END line that comes
    before any BEGIN line masks everything up to it."""

    HOLD_LINE = 64 * 1024
    HOLD_BLOCK = 1024 * 1024
    _BLOCK_START = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----")
    _BLOCK_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY-----")

    def __init__(self, secrets: "list[str] | tuple[()]" = ()):
        self.secrets = [s for s in secrets if s]
        self._tail = max([len(s) for s in self.secrets] + [512])
        self._pending = ""
        self._dropping = False   # inside an over-long private-key block
        self._resync = 0         # after skip(): 2 = mid-line, 1 = maybe inside a block
        self.discarded = 0       # bytes thrown away after skip() (the caller counts them as dropped)

    def add(self, secrets: "list[str]") -> None:
        """More values to mask from now on (a job's own secret-looking variables, known once its spec is read)."""
        self.secrets = sorted(set(self.secrets) | {s for s in secrets if s}, key=len, reverse=True)
        self._tail = max([len(s) for s in self.secrets] + [512])

    @property
    def holding(self) -> bool:
        return bool(self._pending)

    def skip(self) -> None:
        self.discarded += _size(self._pending)
        self._pending, self._dropping, self._resync = "", False, 2

    def feed(self, data: bytes, final: bool = False) -> bytes:
        """Redacted bytes that are safe to release now; `final` releases everything."""
        self._pending += data.decode("utf-8", "surrogateescape")
        if self._resync and not self._resynced(final):
            return b""
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
        return self._redacted("".join(out))

    def release_partial(self) -> bytes:
        """The held unterminated line, redacted, but for what could be the start of a secret."""
        if self._resync or self._dropping or not self._pending:
            return b""
        text = self._pending
        cut = self._hold_from(text)
        self._pending = text[cut:]
        return self._redacted(text[:cut])

    def _redacted(self, text: str) -> bytes:
        return redact_text(text, self.secrets).encode("utf-8", "surrogateescape") if text else b""

    def _resynced(self, final: bool) -> bool:
        """Drop the fragment of a line a skip began in, then a private-key block's remainder if the text
        ends one before beginning any. False while it cannot tell yet."""
        text = self._pending
        if self._resync == 2:
            newline = text.find("\n")
            if newline < 0:
                self.discarded += _size(text)
                self._pending = ""
                return False
            self.discarded += _size(text[:newline + 1])
            text = self._pending = text[newline + 1:]
            self._resync = 1
        end = self._BLOCK_END.search(text)
        start = self._BLOCK_START.search(text)
        if end is not None and (start is None or end.start() < start.start()):
            self._pending = REDACTED + "\n" + text[end.end():].lstrip("\r\n")
        elif start is None and len(text) < self.HOLD_BLOCK and not final:
            return False
        self._resync = 0
        return True

    def _safe_cut(self, text: str) -> int:
        cut = text.rfind("\n") + 1
        if cut == 0 and len(text) > self.HOLD_LINE:
            cut = max(len(text) - self._tail, self._hold_from(text))
        return cut

    def _hold_from(self, text: str) -> int:
        """Where the part of an unterminated line that could still become a secret begins."""
        folded = _folded(text)
        if folded is None:
            return 0
        hold = folded.find(_BEGIN)  # a private-key block is kept whole until its line ends
        hold = len(text) if hold < 0 else hold
        arriving = [_ends_with_part_of(text, value) for value in self.secrets] + [_ends_with_part_of(folded, _BEGIN)]
        hold = min([hold] + [len(text) - k for k in arriving if k])
        region = _last_tokens_start(folded, 4)  # an open trigger lies among the last few tokens
        for trigger in _TRIGGERS:
            at = folded.find(trigger, region)
            while 0 <= at < hold:
                if _OPEN_AFTER.match(folded, at + len(trigger)):
                    hold = _word_start(text, at)
                    break
                at = folded.find(trigger, at + 1)
            k = _ends_with_part_of(folded, trigger)  # the trigger itself may be arriving
            if k:
                hold = min(hold, _word_start(text, len(text) - k))
        return hold

    def _open_block(self, text: str, cut: int) -> int | None:
        """Where a private-key block that does not end before `cut` begins, before `cut`."""
        for m in self._BLOCK_START.finditer(text, 0, max(cut, 0)):
            if not self._BLOCK_END.search(text, m.end(), cut):
                return m.start()
        return None


def _ends_with_part_of(text: str, value: str) -> int:
    """The length of the longest proper prefix of `value` that `text` ends with (0: none)."""
    for k in range(min(len(value) - 1, len(text)), 0, -1):
        if text.endswith(value[:k]):
            return k
    return 0


def _last_tokens_start(text: str, tokens: int) -> int:
    at = len(text)
    for _ in range(tokens):
        while at and not text[at - 1].isspace():
            at -= 1
        while at and text[at - 1].isspace():
            at -= 1
    return at


def _word_start(text: str, at: int) -> int:
    while at and text[at - 1] in _WORDISH:
        at -= 1
    return at


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))
