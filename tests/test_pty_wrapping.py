"""In a real terminal of 80 columns against the test server: ``NO_COLOR`` honoured, and what the
screen shows wrapped at word boundaries; ``/help`` and the tables fit the terminal in display
cells."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_api import FakeAnthropicServer, ModelSpec, text_reply, tool_reply
from support.cli import CLI
from support.compacted_runs import OLDER, SMALL, seed_compacted
from support.pty import ANSI, REPO, Model, Terminal, launch, model, resize, workspace

from agentloop._cli.cells import cells

pytestmark = pytest.mark.heavy  # every test runs the agent in a terminal

__all__ = ["launch", "model", "workspace"]  # the pty fixtures

pytest.importorskip("prompt_toolkit")

COLUMNS = 80
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
REPLY = "Here is the **plan**:\n\n```python\nprint('hi')  # a comment\n```\n\nDone."


def _colors(raw: str) -> list[str]:
    """The color sequences in ``raw`` (foreground, background, 256 and true colors)."""
    found = []
    for match in SGR.finditer(raw):
        codes = [int(c) for c in re.split(r"[;:]", match.group(1)) if c.isdigit()]
        if any(30 <= c <= 49 or 90 <= c <= 107 for c in codes):
            found.append(match.group(0))
    return found


@pytest.fixture
def no_color(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``NO_COLOR=1`` in the environment the terminal's program gets (set before ``launch``)."""
    monkeypatch.setenv("NO_COLOR", "1")
    yield


def test_no_color_draws_no_color_in_the_agent_nor_in_sessions_search(
    no_color: None, launch: Callable[..., Terminal], model: Model, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("".join(f"line {n}\n" for n in range(1, 21)))
    edit = {"path": "notes.txt", "old_string": "line 12\n", "new_string": "twelve zanzibar\n"}
    model.replies += [tool_reply(("edit_file", edit)), text_reply(REPLY)]
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send("change line 12 to twelve zanzibar\r")
    term.expect(r"12 - line 12\s+12 \+ twelve zanzibar")
    term.expect("Done.")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    assert "⎿ 1 line added, 1 removed" in term.screen

    assert _colors(term.raw) == [], _colors(term.raw)[:5]

    search = launch("sessions", "search", "zanzibar", columns=COLUMNS)
    assert search.wait() == 0
    assert "zanzibar" in search.screen
    assert _colors(search.raw) == [] and "\x1b[1m" not in search.raw, search.raw[-500:]


# -- 7. what the screen shows is wrapped at words to 80 columns --------------------------------


@pytest.fixture
def own_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The program measures the terminal itself (a ``COLUMNS`` of the test run would win)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


def _visible(raw: str) -> list[str]:
    """The lines as the terminal leaves them (the text after each line's last \\r)."""
    lines = raw.replace("\r\n", "\n").replace("\0EOF", "").split("\n")
    return [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in lines]


def _words(text: str) -> set[str]:
    return {_bare(word) for word in text.split()}


def _bare(word: str) -> str:
    """A word without the quotes around a title and the … after a word it was cut at."""
    return word.strip('"').removesuffix("…").strip('"')


def _no_cut_word(shown: list[str], whole: str) -> list[str]:
    """Words on the screen that are not words of the unwrapped text (a word cut in two); a
    piece of a word too long for any line (a deep temporary path) is no such cut."""
    known = _words(whole)
    too_long = [w for w in known if len(w) > COLUMNS - 12]
    return [
        w
        for line in shown
        for w in line.split()
        if _bare(w) not in known and w != "…" and not any(_bare(w) in long for long in too_long)
    ]


def test_help_lists_every_variable_and_wraps_at_words(
    own_size: None, launch: Callable[..., Terminal]
) -> None:
    from agentloop._cli.main import ENVIRONMENT

    term = launch("--help", columns=COLUMNS)
    assert term.wait() == 0
    shown = _visible(term.raw)
    assert [line for line in shown if cells(line) > COLUMNS] == []
    whole = subprocess.run(
        [sys.executable, "-m", "agentloop", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "1000", "PYTHONPATH": str(REPO)},
        check=True,
    ).stdout
    assert _no_cut_word(shown, whole) == []
    text = "\n".join(shown)
    found = [name for name in re.findall(r"\b(?:AGENTLOOP|ANTHROPIC)_[A-Z_]+", SOURCE_TEXT())]
    assert set(found) <= {name for name, _ in ENVIRONMENT} | {"ANTHROPIC_AUTH_TOKEN"}
    for name, _ in ENVIRONMENT:
        assert name in text
    assert "NO_COLOR" in text


def SOURCE_TEXT() -> str:
    root = Path(REPO) / "agentloop"
    return "\n".join(p.read_text() for p in root.rglob("*.py") if "integrations" not in p.parts)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_sessions_show_tree_the_demo_and_warnings_wrap_at_words(
    own_size: None,
    launch: Callable[..., Terminal],
    model: Model,
    workspace: Path,
    fake_api: FakeAnthropicServer,
) -> None:
    fake_api.models["claude-sonnet-4-5"] = ModelSpec("claude-sonnet-4-5", 200_000, 64_000)
    long_title = (
        "Please refactor the tokenizer module and keep every public name stable for the "
        "callers in the other packages"
    )
    said = " ".join(f"sentence{n} of a long request about the tokenizer" for n in range(40))
    model.replies += [text_reply("Understood. " + said)]
    term = launch("-m", "claude-sonnet-4-5", "--context-window", "99999", columns=COLUMNS)
    term.prompt()
    start = _visible(term.raw)
    warning = [line for line in start if line.strip()][:2]
    assert warning[0].startswith("agentloop: warning: claude-sonnet-4-5 is deprecated")
    assert all(cells(line) <= COLUMNS for line in start), start
    assert "November 30th, 2026" in " ".join(" ".join(warning).split())
    term.send(long_title + " " + said + "\r")
    term.expect("Understood")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    from agentloop._sessions import open_store

    with open_store() as store:
        sid = store.list_sessions(limit=1)[0].id[:8]

    checked: list[tuple[Terminal, str]] = []
    for args in (("sessions", "show", sid), ("sessions", "tree", sid)):
        shown_term = launch(*args, columns=COLUMNS)
        assert shown_term.wait() == 0
        whole = subprocess.run(
            [sys.executable, "-m", "agentloop", *args],
            capture_output=True,
            text=True,
            cwd=workspace,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=True,
        ).stdout
        checked.append((shown_term, whole))
    for shown_term, whole in checked:
        shown = _visible(shown_term.raw)
        assert [line for line in shown if cells(line) > COLUMNS] == [], shown
        assert _no_cut_word(shown, whole) == [], shown
    tree = _visible(checked[1][0].raw)
    titled = next(line for line in tree if "Please refactor" in line)
    assert re.search(r'"Please refactor( \w+)*…"', titled), titled  # cut at a word, quoted

    demo = launch("demo", columns=COLUMNS)
    assert demo.wait() == 0
    shown = _visible(demo.raw)
    assert [line for line in shown if cells(line) > COLUMNS] == [], shown
    first = shown[0] + " " + shown[1]
    assert re.search(r"in\s+/\S*agentloop-demo-\S+", first), first  # the path whole


# -- 12. -c shows the banner first, then where it resumes ---------------------------------------


def test_continue_shows_the_banner_before_the_orientation(
    launch: Callable[..., Terminal], model: Model
) -> None:
    model.replies += [text_reply("first answer")]
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send("a first question\r")
    term.expect("first answer")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0

    again = launch("-c", columns=COLUMNS)
    again.expect("Resuming session")
    again.prompt()
    again.send("\x04")
    assert again.wait() == 0
    screen = again.screen
    assert 0 <= screen.index("agentloop · claude-sonnet-5-5") < screen.index("Resuming session")


def test_a_long_typed_line_is_echoed_wrapped_at_words(
    launch: Callable[..., Terminal], model: Model
) -> None:
    said = " ".join(f"word{n} about the tokenizer" for n in range(30))
    model.replies += [text_reply("noted")]
    term = launch(columns=COLUMNS)
    term.prompt()
    term.send(said + "\r")
    term.expect("noted")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    # The editor's own drawing (wrapped at any character) is erased; then the echo follows.
    after = term.raw[term.raw.index("› word0", term.raw.index("\x1b[J\x1b[0m\x1b[?7h")) :]
    echo = [line for line in _visible(after.split("noted")[0]) if line.strip()]
    assert echo[0].startswith("› word0") and echo[-1].endswith("word29 about the tokenizer")
    assert all(cells(line) <= COLUMNS for line in echo), echo
    assert _no_cut_word(echo, said + " ›") == [], echo


# -- everything the agent prints, /help and the tables --------------------------------------------


def test_what_the_terminal_prints_is_wrapped_at_words_to_its_width(
    cli: CLI, launch: Callable[..., Terminal]
) -> None:
    seed_compacted(cli, 17)
    cli.script.add(text_reply("a short answer"))

    term = launch(*OLDER, *SMALL, "-c", columns=COLUMNS)
    term.expect("for commands and keys")  # the banner first
    term.expect("Resuming session")
    term.prompt()
    term.send("/context\r")
    term.expect("Session: ")
    term.prompt()
    term.send("/cost\r")
    term.expect("The whole conversation")
    term.expect("output [\\d,]+ tokens")
    term.prompt()
    term.send("/compact\r")
    term.expect("Conversation compacted")
    term.prompt()
    term.send("one more\r")
    term.expect("a short answer")
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
    screen = term.raw
    for what in (
        "Resuming session",
        "agentloop · ",
        "Context: ",
        "Conversation compacted",
        "Session ",
    ):
        assert what in screen
    lines = [line for line in _visible(screen) if line.strip()]
    too_wide = [line for line in lines if cells(line) > COLUMNS]
    assert too_wide == []
    # What was wrapped was broken between words: the figures and words are whole.
    text = " ".join(" ".join(lines).split())
    assert re.search(
        r"Conversation compacted: \d+ messages → new session \w{8} \(~?[\d,]+ → ~?[\d,]+ tokens\)",
        text,
    )
    assert re.search(
        r"Session \w{8} saved · continue with `agentloop --continue` or `agentloop --resume \w{8}`",
        text,
    )
    assert "agentloop · claude-haiku-4-5 · 16,000-token window" in text


def test_help_and_tables_fit_the_terminal_in_display_cells(
    launch: Callable[..., Terminal], model: Model, piped: Callable[..., str]
) -> None:
    model.replies.append(text_reply("ok"))
    title = "日本語のとても長いタイトルのメッセージです、よろしくお願いします"
    piped(f"{title}\n")

    listing = launch("sessions", "list")
    resize(listing, 60)
    listing.expect("ID")
    assert listing.wait() == 0
    lines = [line for line in listing.screen.replace("\0EOF", "").splitlines() if line]
    assert any("日本語" in line for line in lines)
    assert all(cells(line) <= 60 for line in lines), lines

    term = launch()
    term.prompt()
    resize(term, 50)
    term.send("/help\r")
    text = term.expect(r"Commands:[\s\S]*compaction is off\)\.")
    assert all(cells(line) <= 50 for line in text.splitlines()), text
    assert re.search(r"\n\s+summary\)", text)  # wrapped under its column, not cut
    term.prompt()
    term.send("\x04")
    assert term.wait() == 0
