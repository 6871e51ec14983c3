"""list_files and grep honour .gitignore and .ignore files as ripgrep does: nested
files, negation, directory patterns, .git/info/exclude, .gitignore only inside a repository,
.ignore over .gitignore, and an ignored directory searched when it is asked for by name."""

from __future__ import annotations

from pathlib import Path

from support.agent_tools import make_tools, run


def make(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def listed(root: Path, **tool_input: str) -> list[str]:
    return run(make_tools(root), "list_files", **tool_input).content.splitlines()


def grepped(root: Path, **tool_input: str) -> list[str]:
    lines = run(make_tools(root), "grep", pattern="needle", **tool_input).content.splitlines()
    return [line.split(":", 1)[0] for line in lines]


def test_gitignore_in_a_repository_with_nested_files_and_negation(ws: Path) -> None:
    (ws / ".git" / "info").mkdir(parents=True)
    (ws / ".git" / "info" / "exclude").write_text("secret-notes.txt\n")
    make(
        ws,
        {
            ".gitignore": "*.log\nbuild/\n/top-only.txt\n",
            "app.py": "needle",
            "debug.log": "needle",
            "build/out.py": "needle",
            "top-only.txt": "needle",
            "secret-notes.txt": "needle",
            "src/top-only.txt": "needle",
            "src/.gitignore": "generated_*.py\n!keep.log\n",
            "src/keep.log": "needle",
            "src/other.log": "needle",
            "src/generated_a.py": "needle",
            "src/main.py": "needle",
            "src/build/deep.py": "needle",
        },
    )
    assert listed(ws) == [
        ".gitignore",
        "app.py",
        "src/.gitignore",
        "src/keep.log",
        "src/main.py",
        "src/top-only.txt",
    ]
    assert grepped(ws) == ["app.py", "src/keep.log", "src/main.py", "src/top-only.txt"]
    # Rules of the parents apply to a walk that starts below them.
    assert listed(ws, path="src") == [
        "src/.gitignore",
        "src/keep.log",
        "src/main.py",
        "src/top-only.txt",
    ]


def test_gitignore_outside_a_repository_is_not_read_but_ignore_is(ws: Path) -> None:
    make(ws, {".gitignore": "*.txt\n", ".ignore": "*.md\n", "a.txt": "x", "b.md": "x"})
    assert listed(ws) == [".gitignore", ".ignore", "a.txt"]
    (ws / ".git").mkdir()
    assert listed(ws) == [".gitignore", ".ignore"]


def test_ignore_wins_over_gitignore_and_deeper_wins_over_shallower(ws: Path) -> None:
    (ws / ".git").mkdir()
    make(
        ws,
        {
            ".gitignore": "*.dat\n",
            ".ignore": "!wanted.dat\n",
            "wanted.dat": "needle",
            "other.dat": "needle",
            "sub/.ignore": "*.py\n",
            "sub/.gitignore": "!*.py\n",
            "sub/x.py": "needle",
            "sub/y.txt": "needle",
        },
    )
    assert grepped(ws) == ["sub/y.txt", "wanted.dat"]


def test_an_ignored_directory_or_file_named_explicitly_is_searched(ws: Path) -> None:
    (ws / ".git").mkdir()
    make(ws, {".gitignore": "dist/\n*.min.js\n", "dist/a.js": "needle", "b.min.js": "needle"})
    assert listed(ws) == [".gitignore"]
    assert listed(ws, path="dist") == ["dist/a.js"]
    assert grepped(ws, path="dist") == ["dist/a.js"]
    assert grepped(ws, path="b.min.js") == ["b.min.js"]


def test_a_repository_root_above_the_workspace_applies(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    make(repo, {".gitignore": "*.tmp\n", "pkg/a.tmp": "x", "pkg/b.py": "x"})
    assert listed((repo / "pkg").resolve()) == ["b.py"]
