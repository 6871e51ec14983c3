"""Realistic tool outputs: pytest runs, git diffs, logs with tracebacks, shell, grep, listings.

The ``buried_*`` functions plant an error at a chosen character offset inside a long output and
say exactly where it is, so that tests can check that the error reaches the summarizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from transcripts.code import ENTITIES

ROOT = "/home/dev/shop"
MISSING_MODULES = (
    ("yaml", "pyyaml"), ("tomli_w", "tomli-w"), ("redis", "redis"), ("jwt", "pyjwt"),
    ("orjson", "orjson"), ("dateutil", "python-dateutil"), ("boto3", "boto3"),
    ("structlog", "structlog"),
)  # fmt: skip
DB_ERRORS = (
    ("sqlite3.OperationalError: database is locked", "transaction", 88),
    ("sqlite3.IntegrityError: UNIQUE constraint failed: invoices.number", "insert_invoice", 131),
    ("sqlite3.OperationalError: no such column: refunds.reason_code", "list_refunds", 204),
    ("sqlite3.ProgrammingError: Cannot operate on a closed database.", "fetch_page", 57),
)


@dataclass(frozen=True)
class Planted:
    """An output with an error planted in its middle."""

    text: str
    line: str
    """The full line as it stands in the output."""
    needles: tuple[str, ...]
    """What must survive shortening (the error, the frame), each unique in the transcript."""
    offset: int
    """Where ``line`` starts in ``text``."""


def _pad(line: str, width: int = 80) -> str:
    return line + " " * max(1, width - len(line))


def pytest_header(rng: random.Random, collected: int) -> str:
    return (
        "============================= test session starts ==============================\n"
        f"platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0 -- {ROOT}/.venv/bin/python\n"
        "cachedir: .pytest_cache\n"
        "hypothesis profile 'default'\n"
        f"rootdir: {ROOT}\n"
        "configfile: pyproject.toml\n"
        "plugins: hypothesis-6.108.5, cov-5.0.0, anyio-4.4.0\n"
        f"collecting ... collected {collected} items\n\n"
    )


def _test_names(rng: random.Random) -> list[str]:
    names = []
    for entity in ENTITIES:
        module = f"tests/test_{entity}s.py"
        for verb in ("create", "archive", "list", "validate", "serialize", "paginate"):
            names.append(f"{module}::test_{verb}_{entity}_{rng.choice(('ok', 'edge', 'empty'))}")
    rng.shuffle(names)
    return names


def verbose_lines(rng: random.Random, count: int, total: int, start: int = 0) -> list[str]:
    names = _test_names(rng)
    lines = []
    for index in range(count):
        name = names[(start + index) % len(names)]
        percent = (start + index + 1) * 100 // max(total, 1)
        lines.append(f"{_pad(name + ' PASSED', 73)}[{percent:3d}%]")
    return lines


def pytest_passing(rng: random.Random, *, verbose: bool = False) -> str:
    passed = rng.randint(40, 260)
    seconds = rng.uniform(1.2, 19.0)
    if not verbose:
        dots = "." * passed
        body = "\n".join(
            f"{dots[i : i + 72]:<72} [{min(100, (i + 72) * 100 // passed):3d}%]"
            for i in range(0, passed, 72)
        )
        return f"{body}\n{passed} passed in {seconds:.2f}s\n"
    count = min(passed, rng.randint(8, 30))
    lines = verbose_lines(rng, count, count)
    return (
        pytest_header(rng, count)
        + "\n".join(lines)
        + f"\n\n============================== {count} passed in {seconds:.2f}s "
        "===============================\n"
    )


def pytest_failure(rng: random.Random, entity: str) -> str:
    """A failing run (an assertion) with its traceback and summary, 1.5-3 KB."""
    passed = rng.randint(30, 200)
    test = f"test_list_{entity}s_filters_by_status"
    got, want = rng.randint(51, 120), 50
    return (
        f"{'.' * min(passed, 60)}F{'.' * rng.randint(5, 40)}\n"
        "=================================== FAILURES ===================================\n"
        f"__________________ {test}[archived] __________________\n\n"
        "conn = <sqlite3.Connection object at 0x7f3a2c1e5d40>, status = 'archived'\n\n"
        '    @pytest.mark.parametrize("status", ["active", "archived", "pending"])\n'
        f"    def {test}(conn: sqlite3.Connection, status: str) -> None:\n"
        f"        rows = list_{entity}s(conn, status=status, limit=500)\n"
        ">       assert len(rows) <= MAX_PAGE_SIZE\n"
        f"E       assert {got} <= {want}\n"
        f"E        +  where {got} = len([{entity.capitalize()}(id=1, name='a', status='archived'"
        "), ...])\n\n"
        f"tests/test_{entity}s.py:{rng.randint(20, 90)}: AssertionError\n"
        "=========================== short test summary info ============================\n"
        f"FAILED tests/test_{entity}s.py::{test}[archived] - assert {got} <= {want}\n"
        f"1 failed, {passed} passed in {rng.uniform(1, 9):.2f}s\n"
    )


def buried_module_error(
    rng: random.Random, module: str, *, offset: int = 4200, total: int = 5300
) -> Planted:
    """A verbose pytest run with coverage whose only failure, a ``ModuleNotFoundError`` from a
    lazy import, sits at about ``offset`` of ``total`` characters; nothing after it names the
    module (the run uses ``-rN``, so no short summary repeats it)."""
    line = f"E           ModuleNotFoundError: No module named '{module}'"
    before_error = (
        "=================================== FAILURES ===================================\n"
        "_________________________ test_load_settings_from_file _________________________\n\n"
        "tmp_path = PosixPath('/tmp/pytest-of-dev/pytest-41/test_load_settings_from_file0')\n\n"
        "    def test_load_settings_from_file(tmp_path: Path) -> None:\n"
        '        path = tmp_path / "settings.cfg"\n'
        '        path.write_text("debug = true\\n")\n'
        ">       settings = load_settings(path)\n\n"
        "tests/test_config.py:41: \n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n\n"
        "path = PosixPath('/tmp/pytest-of-dev/pytest-41/test_load_settings_from_file0/"
        "settings.cfg')\n\n    def load_settings(path: Path) -> Settings:\n"
        "        if path.suffix in SUPPORTED_SUFFIXES:\n"
        f">           import {module}\n"
    )
    after_error = (
        "\nsrc/app/config.py:57: ModuleNotFoundError\n\n"
        "---------- coverage: platform linux, python 3.11.9-final-0 -----------\n"
        "Name                              Stmts   Miss  Cover\n"
        "-----------------------------------------------------\n"
    )
    header = pytest_header(rng, 212)
    room = offset - len(header) - len(before_error)
    lines: list[str] = []
    used = 0
    for candidate in verbose_lines(rng, 211, 212):
        if used + len(candidate) + 1 > room:
            break
        lines.append(candidate)
        used += len(candidate) + 1
    head = header + "\n".join(lines) + ("\n" if lines else "") + before_error
    text = head + line + after_error
    modules = [f"src/app/{name}.py" for name in ("api", "cli", "config", "db", "worker")]
    modules += [f"src/app/services/{entity}s.py" for entity in ENTITIES]
    index = 0
    closing = (
        "=========================== 1 failed, 211 passed in 12.41s ============================\n"
    )
    while len(text) + len(closing) < total and index < 200:
        name = modules[index % len(modules)]
        stmts = rng.randint(20, 400)
        miss = rng.randint(0, stmts // 5)
        text += f"{name:<34}{stmts:>5}{miss:>7}{(stmts - miss) * 100 // stmts:>5}%\n"
        index += 1
    text += closing
    return Planted(text, line, (f"ModuleNotFoundError: No module named '{module}'",), len(head))


def _log_line(rng: random.Random, clock: list[float]) -> str:
    clock[0] += rng.uniform(0.001, 0.4)
    seconds = clock[0]
    minute, second, millis = 14 + int(seconds) // 60, int(seconds) % 60, int(seconds * 1000) % 1000
    stamp = f"2026-03-02 10:{minute:02d}:{second:02d},{millis:03d}"
    entity = rng.choice(ENTITIES)
    job = rng.randint(8000, 9999)
    message = rng.choice(
        (
            f"INFO app.worker: picked job {job} ({entity}.sync) from queue billing",
            f"INFO app.worker: job {job} done in {rng.uniform(0.01, 2):.3f}s",
            f"DEBUG app.db: pool checkout conn={rng.randint(1, 8)} wait={rng.uniform(0, 0.2):.3f}s",
            f"INFO httpx: HTTP Request: GET https://api.example-shop.test/v1/{entity}s?limit=100 "
            '"HTTP/1.1 200 OK"',
            f"WARNING app.services.{entity}s: slow query ({rng.randint(200, 900)} ms) on {entity}s",
        )
    )
    return f"{stamp} {message}"


def buried_traceback(
    rng: random.Random, *, offset: int = 3600, total: int = 7400, avoid: str = ""
) -> Planted:
    """Worker logs with one job's traceback (a ``src/app/db.py`` frame and its error) in the
    middle; the logs go on after it and never repeat the error. ``avoid``: text whose errors
    are not to be planted again (so each planted error is unique in a transcript)."""
    fresh = [item for item in DB_ERRORS if item[0] not in avoid] or list(DB_ERRORS)
    error, function, lineno = rng.choice(fresh)
    clock = [0.0]
    frame = f'  File "src/app/db.py", line {lineno}, in {function}'
    job = rng.randint(8000, 9999)
    lines = [f"$ python -m app.worker --once --queue billing (pid {rng.randint(30000, 60000)})"]
    while sum(len(x) + 1 for x in lines) < offset - 420:
        lines.append(_log_line(rng, clock))
    lines += [
        f"2026-03-02 10:15:05,902 ERROR app.worker: job {job} failed",
        "Traceback (most recent call last):",
        f'  File "{ROOT}/src/app/worker.py", line 142, in run_job',
        "    result = handler(job.payload)",
        f'  File "{ROOT}/src/app/services/billing.py", line 77, in charge',
        "    with db.transaction() as conn:",
    ]
    head = "\n".join(lines) + "\n"
    tail_lines = [
        '    conn.execute("BEGIN IMMEDIATE")',
        error,
        f"2026-03-02 10:15:05,903 INFO app.worker: job {job} will be retried in 30s (attempt 2/5)",
    ]
    text = head + frame + "\n" + "\n".join(tail_lines) + "\n"
    while len(text) < total:
        text += _log_line(rng, clock) + "\n"
    return Planted(text, frame, (frame.strip(), error), len(head))


def git_diff(rng: random.Random, path: str, old: str, new: str) -> str:
    start = rng.randint(10, 200)
    old_lines, new_lines = old.splitlines(), new.splitlines()
    body = [f"-{line}" for line in old_lines] + [f"+{line}" for line in new_lines]
    context = ["     conn = sqlite3.connect(path, timeout=timeout)", "     try:"]
    return (
        f"diff --git a/{path} b/{path}\n"
        f"index {rng.randbytes(4).hex()[:7]}..{rng.randbytes(4).hex()[:7]} 100644\n"
        f"--- a/{path}\n+++ b/{path}\n"
        f"@@ -{start},{len(old_lines) + 2} +{start},{len(new_lines) + 2} @@\n"
        + "\n".join([context[0], *body, context[1]])
        + "\n"
    )


def git_status(paths: list[str]) -> str:
    changed = "\n".join(f"\tmodified:   {path}" for path in paths)
    return (
        "On branch fix/billing-retries\nYour branch is up to date with 'origin/fix/billing-retries'"
        ".\n\nChanges not staged for commit:\n"
        '  (use "git add <file>..." to update what will be committed)\n'
        f'{changed}\n\nno changes added to commit (use "git add" and/or "git commit -a")\n'
    )


def ruff_output(rng: random.Random, paths: list[str]) -> tuple[str, bool]:
    if rng.random() < 0.5:
        return "All checks passed!\n", False
    lines = []
    for path in paths[:3]:
        line = rng.randint(5, 300)
        lines.append(
            f"{path}:{line}:{rng.randint(1, 40)}: "
            + rng.choice(
                (
                    "F401 [*] `json` imported but unused",
                    "E501 Line too long (104 > 100)",
                    "B008 Do not perform function call `datetime.now` in argument defaults",
                    "SIM108 Use ternary operator instead of `if`-`else`-block",
                )
            )
        )
    return "\n".join(lines) + f"\nFound {len(lines)} errors.\n[*] 1 fixable with `--fix`.\n", True


def mypy_output(rng: random.Random, paths: list[str]) -> tuple[str, bool]:
    if rng.random() < 0.5:
        return f"Success: no issues found in {rng.randint(20, 60)} source files\n", False
    path = paths[0] if paths else "src/app/db.py"
    return (
        f'{path}:{rng.randint(10, 200)}: error: Argument 1 to "get_order" has incompatible type '
        '"str"; expected "int"  [arg-type]\n'
        f"{path}:{rng.randint(10, 200)}: error: Missing return statement  [return]\n"
        "Found 2 errors in 1 file (checked 41 source files)\n"
    ), True


def pip_install(rng: random.Random, package: str) -> str:
    version = f"{rng.randint(1, 6)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
    return (
        f"Collecting {package}\n"
        f"  Downloading {package.replace('-', '_')}-{version}-py3-none-any.whl "
        f"({rng.randint(40, 900)} kB)\n"
        "     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 212.3/212.3 kB 3.1 MB/s eta 0:00:00\n"
        f"Installing collected packages: {package}\n"
        f"Successfully installed {package}-{version}\n"
    )


def numbered(text: str, start: int = 1) -> str:
    """A file as read_file shows it: right-aligned line numbers and a tab."""
    return "\n".join(
        f"{number:>6}\t{line}" for number, line in enumerate(text.splitlines(), start=start)
    )


def grep_output(rng: random.Random, pattern: str, files: dict[str, str], limit: int) -> str:
    hits = []
    for path, text in files.items():
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern in line:
                hits.append(f"{path}:{number}:{line}")
    rng.shuffle(hits)
    return "\n".join(sorted(hits[:limit])) or "(no matches)"


def listing(paths: list[str]) -> str:
    return "\n".join(sorted(paths))
