"""Other people's text shown on a terminal: names, commands and output of jobs are data, never terminal control.

A job named with an escape sequence (`\\e]0;...\\a` retitles the terminal) or a newline (which splits a table's
row) is shown escaped, as `ls` and `git` do: control characters (C0, DEL, C1) and other unprintable code points
become backslash escapes, so every table stays one line per job and nothing reaches the terminal as a command.
`--json` and `logs` are byte-exact and never pass through here.
"""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\e", "\\": "\\\\"}


def printable(text: str) -> str:
    """`text` with every character that is not printable written as an escape (a backslash doubled only where
    something else was escaped, so an ordinary path or command reads as it is)."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch in _NAMED and ch != "\\":
        return _NAMED[ch]
    if ch == "\\":
        return "\\\\"
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
