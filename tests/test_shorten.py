"""What a long output keeps when it is shortened for the summarizer: which middle lines rank as
errors, locations or trouble, and the boundaries of each rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transcripts import CORPUS

from agentloop import as_messages
from agentloop._core.cutting.cut_and_prune import prune_tool_outputs
from agentloop._core.values.shorten import one_line, rank_lines, shorten

ERROR, LOCATION, TROUBLE = 0, 1, 2


def ranked(*lines: str) -> dict[int, int]:
    return rank_lines("\n".join(lines))


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        ("ModuleNotFoundError: No module named 'yaml'", ERROR),
        ("ValueError: bad value", ERROR),
        ("RuntimeException: stopped", ERROR),
        ("Exit: 3", ERROR),
        ("=== 2 FAILED, 40 passed ===", ERROR),
        ("test_x ... FAIL", ERROR),
        ("[ERROR] build broke", ERROR),
        ("FATAL: out of memory", ERROR),
        ("thread 'main' panicked at src/main.rs:4:5", ERROR),
        ("src/lib.rs:10: error: expected ';'", ERROR),
        ("error[E0308]: mismatched types", ERROR),
        ("E       assert 1 == 2", ERROR),
        ("Traceback (most recent call last):", ERROR),
        ('  File "/src/app.py", line 12, in main', LOCATION),
        ("    at parse (/src/parse.js:31:7)", LOCATION),
        ("see lib/config.toml:12 for the value", LOCATION),
        ("WARNING: deprecated call", TROUBLE),
        ("permission denied", TROUBLE),
        ("connection refused", TROUBLE),
        ("bash: foo: command not found", TROUBLE),
        ("ls: no such file", TROUBLE),
        ("request timed out after 30s", TROUBLE),
        ("Timeout while waiting", TROUBLE),
        ("Segfault in worker", TROUBLE),
        ("assertion about the input", TROUBLE),
        ("the test failed twice", TROUBLE),
        ("a failure upstream", TROUBLE),
        ("errno 13", TROUBLE),
        ("it cannot be opened", TROUBLE),
    ],
)
def test_a_telling_line_ranks(line: str, rank: int) -> None:
    assert ranked("ordinary start", line, "ordinary end") == {1: rank}


@pytest.mark.parametrize(
    "line",
    [
        "errors are reported below",  # "error" without ":" or "["
        "myerror: not a word boundary before",
        "FAILURES section header",  # FAIL inside a longer upper-case word
        "ERRORS",  # ERROR inside a longer word
        "the fatal flaw",  # only upper-case FATAL is an error
        "timestamps at 12:30",  # no extension before ":\d"
        " .5:3 ratio",  # a location needs something before the dot
        "reassert the lock",  # assert inside a word
        "what went wrong was unexpected",
        "quoted: Traceback (most recent call last)",  # a traceback starts its line
    ],
)
def test_an_ordinary_line_is_not_ranked(line: str) -> None:
    assert ranked("start", line, "end") == {}


def test_the_most_telling_rank_wins_on_a_line() -> None:
    assert ranked("x", 'File "a.py", line 3: ValueError: bad', "y") == {1: ERROR}
    assert ranked("x", "warning at lib/a.py:3", "y") == {1: LOCATION}


def test_lines_are_counted_right_past_text_whose_lowering_changes_length() -> None:
    # "İ".lower() is two characters: positions in a str.lower() copy drift from the original
    text = "İ" * 50 + "\nordinary\npermission denied\nmore"
    assert rank_lines(text) == {2: TROUBLE}


def test_a_pytest_error_line_at_the_very_start_counts() -> None:
    assert rank_lines("E   KeyError\nordinary") == {0: ERROR}


def test_an_error_in_the_middle_of_a_long_output_survives_shortening() -> None:
    lines = [f"collecting module_{i}.py ok" for i in range(400)]
    lines[200] = "ModuleNotFoundError: No module named 'pandas'"
    text = "\n".join(lines)
    short = shorten(text, 2_000)
    assert len(short) < len(text) // 4
    assert "ModuleNotFoundError: No module named 'pandas'" in short


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(sorted(CORPUS)),
    seed=st.integers(0, 1_000),
    first=st.floats(0.1, 0.6),
    second=st.floats(0.6, 0.95),
)
def test_pruning_further_in_two_steps_equals_pruning_once(
    name: str, seed: int, first: float, second: float
) -> None:
    """The compacter prunes to the planned tail, then only the difference to the smallest."""
    messages = as_messages(CORPUS[name](seed, 80).messages)
    near, far = int(len(messages) * first), int(len(messages) * second)
    once = prune_tool_outputs(messages, keep_from=far)
    stepped = prune_tool_outputs(
        prune_tool_outputs(messages, keep_from=near), keep_from=far, start=near
    )
    assert [m.content for m in stepped] == [m.content for m in once]
    assert any(m.content != o.content for m, o in zip(once, messages, strict=True))


def test_one_line_collapses_whitespace_and_cuts_with_an_ellipsis() -> None:
    assert one_line("  pytest\n  -q\t tests/ ") == "pytest -q tests/"
    assert one_line("a b c d e f", 5) == "a b …"
    assert len(one_line("x" * 50, 10)) == 10
    assert one_line("short", 5) == "short"  # at the limit: whole
