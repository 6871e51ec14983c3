"""The repository stands alone: no source, test, benchmark, example or doc cites a work item by
its number ("issue 27", "(issue 21.5)") or points at a file outside the repository (another
checkout, a shared notes folder, this checkout's own absolute path); each says what it holds in
its own words. And a test module is named after what it tests, not after a round of work."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WALKED = ("agentloop", "sessions", "tests", "benchmarks", "examples", "docs")
TEXT = {".py", ".md", ".toml", ".txt", ".json", ".sql", ".sh", ".cfg", ".ini", ".yml", ".yaml"}

ISSUE = re.compile(r"\b[Ii]ssues?\s*#?\s*\d+(?:\.\d+)?\b")
"""A work item by number: "issue 27", "Issue 28,", "issues 10 and 20", "issue\\n27", "(issue 21.5)".
"issue #" with no number (a title in a test) is no citation."""
PUBLIC = re.compile(r"github|gitlab|https?://", re.IGNORECASE)
"""Before a number on the same line, these make it a public project's issue (a link's text)."""
OUTSIDE = re.compile(
    r"\.\./(?:shared|main|wt|seeds)\b|/work/(?:main|wt|shared|seeds|\.library)\b|(?<![\w./-])seeds/"
)
"""Files of other trees on the machine this was written on (``../shared/notes``, ``/work/wt/x``):
a fake workspace in a test (``/work/app``) is a value, not a reference, and is not matched."""
ROUND_NAMED = re.compile(r"_(?:round\d*|polish|beyond)(?:_|\.py$)")


def findings(path: Path, text: str) -> list[str]:
    """Each citation of a work item and each path outside the repository in ``text``."""
    found: list[str] = []
    own_path = str(ROOT)
    for match in ISSUE.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if PUBLIC.search(text, line_start, match.start()):
            continue
        found.append(f"{path}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}")
    for match in OUTSIDE.finditer(text):
        found.append(f"{path}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}")
    at = text.find(own_path)
    while at != -1:
        found.append(f"{path}:{text.count(chr(10), 0, at) + 1}: {own_path!r}")
        at = text.find(own_path, at + 1)
    return found


def _walked() -> list[Path]:
    this = Path(__file__).resolve()
    return [
        path
        for folder in WALKED
        for path in sorted((ROOT / folder).rglob("*"))
        if path.is_file()
        and path.suffix in TEXT
        and "__pycache__" not in path.parts
        and path.resolve() != this  # its own patterns and samples
    ]


def test_nothing_cites_an_issue_or_a_path_outside_the_repository() -> None:
    files = _walked()
    assert len(files) > 300, "the folders are where this test looks"
    found = [
        hit
        for path in files
        for hit in findings(path.relative_to(ROOT), path.read_text(errors="replace"))
    ]
    assert found == []


def test_the_checker_flags_citations_and_outside_paths_and_nothing_else() -> None:
    flagged = """
        A session keeps its prefix (issue 27): the system prompt is stored.
        No dead code (issue 21.5): vulture reads agentloop/.
        The fault figures of issues 10 and 20 at full count.
        Issue 9: the 8 characters shown used to be the creation second.
        on a model that thinks by default (claude-sonnet-5-5, issue
        27) against the test server
        the notes in ../shared/notes/api-thinking-and-compaction.md
        PYTHONPATH=/work/wt/another python -m pytest
        python seeds/run.py
    """
    kept = """
        title = "Why <summary> vanished in `<b>` and issue #"
        Fixed upstream: GitHub issue 1234 (https://github.com/org/project/issues/1234).
        workspace="/work/app", title="fix the parser"
        the facts of the first round survived; after round 2 the tool result is kept
        python benchmarks/bench_survival.py --seeds 0 1
    """
    hits = findings(Path("sample.py"), flagged)
    assert [hit.split(": ", 1)[1] for hit in hits] == [
        "'issue 27'",
        "'issue 21.5'",
        "'issues 10'",
        "'Issue 9'",
        "'issue\\n        27'",
        "'../shared'",
        "'/work/wt'",
        "'seeds/'",
    ]
    assert findings(Path("sample.py"), kept) == []
    # This checkout's own absolute path, wherever it is.
    assert f"sample.py:1: {str(ROOT)!r}" in findings(Path("sample.py"), f"cd {ROOT} && pytest")


def test_test_modules_are_named_after_what_they_test_not_a_round_of_work() -> None:
    tests = ROOT / "tests"
    named = [path.name for path in tests.glob("test_*.py") if ROUND_NAMED.search(path.name)]
    assert named == []
    assert ROUND_NAMED.search("test_cli_round3.py") and ROUND_NAMED.search("test_pty_polish.py")
    assert ROUND_NAMED.search("test_cli_commands_round2.py")
    assert not ROUND_NAMED.search("test_cli_compact.py")
