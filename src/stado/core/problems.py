"""Problems are values: what a pass met and could not decide on, as (kind, job id, text). Code decides on the
kind; people read the text. Nothing branches on the words of a log line.
"""
from runkit.core.records import record

# A record that cannot be read (corrupt, or not a job document where one belongs): reported, skipped, never
# fatal; `stado repair` clears it.
CORRUPT = "corrupt"
# A decided move that a corrupt record holds up (its outcome waits in running/ until that key is repaired).
HELD_UP = "held_up"


class Problem(record("Problem", "kind job_id text")):
    """`kind`: CORRUPT or HELD_UP; `job_id`: the job it concerns (None when the key names none); `text`: one line
    for people. An agent reports each once (it would meet it again on every pass)."""

    __slots__ = ()

    def __str__(self) -> str:
        return self.text
