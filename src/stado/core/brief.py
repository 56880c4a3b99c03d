"""Text for a log line or a message, bounded without cutting a word: brief(text, limit)."""

MARK = "…"
# Where a cut may fall inside a long token (a URL, a path) when the text has no space late enough.
_SOFT = " /,;:)=&"


def brief(text: str, limit: int = 200) -> str:
    """`text` on one line (runs of whitespace, newlines included, become one space) and at most `limit` characters:
    cut at the last word boundary that keeps at least half of it, and marked with MARK where it was cut."""
    line = " ".join(str(text).split())
    if len(line) <= limit:
        return line
    room = max(1, limit - len(MARK))
    cut = line.rfind(" ", 0, room + 1)
    if cut < room // 2:
        soft = max(line.rfind(c, 0, room) for c in _SOFT)
        cut = soft + 1 if soft >= room // 2 else room
    return line[:cut].rstrip(" ,;:-") + MARK
