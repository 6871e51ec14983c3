"""The text helpers of the sessions commands: fences, Markdown escaping, tables that fit."""

from __future__ import annotations

from agentloop._cli.markup import fence, markdown_text
from agentloop._cli.render import Column, cut, fit_table


def test_a_fence_is_longer_than_any_backtick_run_inside() -> None:
    assert fence("plain") == "```\nplain\n```"
    assert fence("a ``` b") == "````\na ``` b\n````"
    text = "x" * 100_000 + "`" * 7 + "y"
    assert fence(text, "json").startswith("````````json\n")


def test_markdown_text_moves_headings_below_the_message_heading() -> None:
    assert (
        markdown_text("## Goal\n- x\n# Top\n###### deep") == "#### Goal\n- x\n### Top\n###### deep"
    )
    assert markdown_text("#hashtag and #1") == "#hashtag and #1"  # not headings


def test_markdown_text_shows_tags_and_leaves_code_alone() -> None:
    assert markdown_text("<summary>\nhi\n</summary>") == "&lt;summary>\nhi\n&lt;/summary>"
    assert markdown_text("a < b and `<tag>`") == "a < b and `<tag>`"
    code = "~~~\n## kept\n<kept>\n~~~\n## moved"
    assert markdown_text(code) == "~~~\n## kept\n<kept>\n~~~\n#### moved"


def test_fit_table_drops_and_cuts_to_the_width() -> None:
    columns = [
        Column("ID"),
        Column("MODEL", drop=1),
        Column("TITLE", flex=True, min_width=10),
    ]
    rows = [["abcd1234", "claude-sonnet-5-5", "a title that is much too long for the line"]]
    wide = fit_table(columns, rows, None)
    assert wide[1].endswith("much too long for the line")
    narrow = fit_table(columns, rows, 50)
    assert all(len(line) <= 50 for line in narrow)
    assert "MODEL" in narrow[0] and narrow[1].endswith("…")
    tiny = fit_table(columns, rows, 24)
    assert "MODEL" not in tiny[0] and all(len(line) <= 24 for line in tiny)


def test_cut_and_cut_at_a_word() -> None:
    from agentloop._cli.cells import cut_words

    assert cut("abcdef", 4) == "abc…"
    assert cut("/home/me/project", 8, keep_end=True) == "…project"
    assert cut_words("the title of a long conversation", 16) == "the title of a…"
    assert cut_words("unbreakable", 6) == "unbre…"
