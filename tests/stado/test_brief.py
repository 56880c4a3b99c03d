"""Text bounded for a log line or a message: cut at a word, and marked where it was cut."""
import random

import pytest

from stado.core.brief import MARK, brief
from stado.objectstore.cloud_errors import one_line

OBSTORE_GAVE_UP = ("Generic S3 error: Error performing PUT http://127.0.0.1:41429/stado/t-4f1c2a9b7d3e/queue/"
                   "0193ab4c-8de0-7a6b-b1f2-3c4d5e6f7a8b.json in 1.204871233s, after 4 retries, max_retries: 4, "
                   "retry_timeout: 20s  - HTTP error: error sending request\n\nDebug source:\nGeneric {...}")


def test_short_text_is_kept_on_one_line():
    assert brief("a  b\n c\td", 200) == "a b c d"
    assert brief("exactly ten", 11) == "exactly ten"


def test_long_text_is_cut_at_a_word_and_marked():
    said = brief("the store answered 503 SlowDown to five tries over twenty seconds", 30)
    assert said == "the store answered 503" + MARK and len(said) <= 30


def test_a_long_token_is_cut_after_a_separator_inside_it():
    said = brief("see http://127.0.0.1:8333/stado/t-1a2b/queue/abcdefghijklmnop.json for more", 40)
    assert said.endswith("/" + MARK) and len(said) <= 40, said


@pytest.mark.parametrize("seed", range(200))
def test_no_cut_ever_falls_inside_a_word(seed):
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12))) for _ in range(rng.randint(1, 60))]
    text = " ".join(words)
    limit = rng.randint(5, 120)
    said = brief(text, limit)
    assert len(said) <= limit
    if said == text:
        return
    kept = said[:-len(MARK)]
    assert said.endswith(MARK) and text.startswith(kept)
    room = limit - len(MARK)
    if text.rfind(" ", 0, room + 1) >= room // 2:  # a space late enough: only whole words are kept
        assert text[len(kept)] == " " and kept.split(" ") == words[:len(kept.split(" "))]
    else:  # one word longer than half the room: nothing else to cut at
        assert len(kept) == room


def test_an_obstore_message_is_never_shown_cut_mid_word():
    said = one_line(OBSTORE_GAVE_UP)
    assert "max_" not in said and "retries" not in said and "http://" not in said, said
    assert said == "Generic S3 error: HTTP error: error sending request"
