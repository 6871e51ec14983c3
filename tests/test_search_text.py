"""What full-text search sees of a text: the words both backends index."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessions._search_text import _WORD, MAX_WORD_CHARS, index_words


def words_of(text: str) -> list[str]:
    return index_words([{"type": "text", "text": text}])


@given(st.text(st.characters(max_codepoint=127)))
def test_ascii_text_is_split_as_the_regex_splits_any_text(text: str) -> None:
    # ASCII takes a faster path (str.translate); it must find the very same words.
    expected = [w for w in _WORD.findall(text.lower()) if len(w) <= MAX_WORD_CHARS]
    assert words_of(text) == expected


def test_words_are_letters_and_digits_lowercased_in_any_script() -> None:
    text = "Edit src/App_main.py: ORCHID-7, naïve 東京 café"
    expected = "edit src app main py orchid 7 naïve 東京 café"
    assert words_of(text) == expected.split()
    assert words_of("a " + "x" * (MAX_WORD_CHARS + 1) + " b") == ["a", "b"]
