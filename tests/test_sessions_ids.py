"""Session ids: format, random prefixes, validation of every reference a user can type.

Ordering comes from the stored ``created_at`` (pinned in the contract suite), not from ids.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions import InvalidSessionIdError, new_session_id, validate_session_ref
from sessions._ids import ALPHABET, EPOCH, SHORT_LENGTH, TIME_CHARS, validate_session_id

ID_RE = re.compile(r"[0-9a-hjkmnp-tv-z]{26}")


def test_new_id_is_26_lowercase_crockford_characters() -> None:
    for _ in range(200):
        assert ID_RE.fullmatch(new_session_id())


def id_timestamp(session_id: str) -> datetime:
    """The creation second a full id encodes (the layout read back, as only this test needs)."""
    value = 0
    for char in validate_session_id(session_id)[SHORT_LENGTH : SHORT_LENGTH + TIME_CHARS]:
        value = value * 32 + ALPHABET.index(char)
    return datetime.fromtimestamp(EPOCH.timestamp() + value, UTC)


def test_layout_random_then_seconds_since_2020_then_random() -> None:
    moment = datetime(2031, 5, 17, 8, 30, 12, 999_000, tzinfo=UTC)
    session_id = new_session_id(moment, rand=lambda n: b"\x00" * n)
    assert session_id[:8] == "0" * 8
    assert session_id[14:] == "0" * 12
    assert session_id[8:14] != "0" * 6
    assert id_timestamp(session_id) == moment.replace(microsecond=0)
    assert new_session_id(EPOCH, rand=lambda n: b"\x00" * n) == "0" * 26


def test_random_part_comes_from_rand() -> None:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    first = new_session_id(moment, rand=lambda n: b"\xff" * n)
    second = new_session_id(moment, rand=lambda n: b"\xff" * n)
    assert first == second
    assert first[:8] == "z" * 8
    assert first[14:] == "z" * 12


def test_what_the_user_sees_and_types_is_random() -> None:
    """The 8 characters shown used to be mostly the creation second, so a 4-character
    prefix covered ~17 minutes. Now 3,000 sessions made in ONE second still differ early."""
    rng = random.Random(9)
    moment = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
    ids = [new_session_id(moment, rand=rng.randbytes) for _ in range(3000)]
    by_four = Counter(i[:4] for i in ids)
    unique_at_four = sum(1 for i in ids if by_four[i[:4]] == 1)
    assert unique_at_four >= 0.99 * len(ids)
    assert len({i[:6] for i in ids}) == len(ids)


def test_ids_of_the_earlier_layout_stay_valid() -> None:
    # Seconds first, as stores written before this layout hold them.
    earlier = "6fe0v3zc" + "q" * 18
    assert validate_session_id(earlier) == earlier
    assert validate_session_ref(earlier[:4]) == earlier[:4]


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError):
        new_session_id(datetime(2025, 1, 1))


def test_full_ids_and_prefixes_are_accepted_and_normalized() -> None:
    session_id = new_session_id()
    assert validate_session_ref(session_id) == session_id
    assert validate_session_ref(session_id[:4]) == session_id[:4]
    assert validate_session_ref(session_id.upper()) == session_id
    assert validate_session_id(session_id) == session_id


@pytest.mark.parametrize(
    "bad",
    [
        "",
        " ",
        "../x",
        "..",
        "abc",
        "ab cd",
        " abcd",
        "abcd ",
        "abcd/efgh",
        "il0u",  # letters Crockford leaves out
        "abcd\n",
        "a" * 27,
        "ábcd",
        "abcd%",
    ],
)
def test_bad_references_are_refused_with_one_line(bad: str) -> None:
    with pytest.raises(InvalidSessionIdError) as caught:
        validate_session_ref(bad)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("invalid session id")


def test_non_string_reference_is_refused() -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_ref(1234)  # type: ignore[arg-type]


def test_prefix_is_not_a_full_id() -> None:
    with pytest.raises(InvalidSessionIdError, match="26 characters"):
        validate_session_id(new_session_id()[:10])


@given(st.text(max_size=40))
def test_validation_accepts_exactly_the_alphabet_between_4_and_26_chars(text: str) -> None:
    valid = text.isascii() and 4 <= len(text) <= 26 and all(c in ALPHABET for c in text.lower())
    if valid:
        assert validate_session_ref(text) == text.lower()
    else:
        with pytest.raises(InvalidSessionIdError):
            validate_session_ref(text)


def test_non_ascii_lookalikes_are_refused() -> None:
    with pytest.raises(InvalidSessionIdError):
        validate_session_ref("\u212aabc")  # KELVIN SIGN lowercases to "k"
