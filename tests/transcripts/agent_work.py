"""What a coding agent does in a session, before any agent's tools say it: the plan that
``transcripts.other_agents`` renders in the shapes of Claude Code, pi, OpenHands and Codex.

A session is a run of tasks on a shop backend (``src/shop/<module>.py`` and its tests): the
user asks for a change (with numbers), the agent plans a todo list, searches, reads the module
and its tests, adds a failing test, runs it (a long pytest output, the error in the middle of
captured logs), edits the module (an edit whose old text is not found, now and then, then a
partial read and the edit again), runs the tests until they pass, runs the whole suite (``pytest
-x tests``, the same command many times, failing after a regression in another module, then
passing), lints and type-checks (failing, then passing), writes migrations, docs and the
changelog, and runs a few commands of its own (git, the CLI, curl, sqlite3). Each step is a
plain value; the file contents are kept, so every edit's old text stands in the file it edits.
Deterministic per seed; the number of tasks follows ``size`` (messages).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "MODULES",
    "Ask",
    "Delete",
    "Edit",
    "Grep",
    "Read",
    "Run",
    "Say",
    "Step",
    "Todo",
    "Write",
    "plan_session",
]

MODULES = (
    "cart", "orders", "payments", "inventory", "pricing", "shipping", "coupons", "tax",
    "invoices", "refunds", "customers", "auth", "search", "reports", "notifications",
    "webhooks", "catalog", "warehouse", "returns", "loyalty",
)  # fmt: skip
NOUNS = {m: m.rstrip("s") if m.endswith("s") else m for m in MODULES}


@dataclass(frozen=True)
class Ask:
    """The user types a request (``steering``: typed beside the results of the step before)."""

    text: str
    steering: bool = False


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Todo:
    """The whole todo list: ``(content, status)``, status ``pending``, ``in_progress`` or
    ``completed``."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Read:
    """A read of ``path``; ``lines`` (first, last; 1-based) for part of it. ``content`` is the
    whole file at that moment."""

    path: str
    content: str
    lines: tuple[int, int] | None = None


@dataclass(frozen=True)
class Write:
    """A whole-file write; ``new``: the file did not exist."""

    path: str
    content: str
    new: bool
    old_content: str = ""


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` in ``path``; ``found`` False: the old text is not in the file
    (the edit fails and changes nothing)."""

    path: str
    old: str
    new: str
    found: bool = True
    content: str = ""
    """The file after the edit (before it, when the edit fails)."""


@dataclass(frozen=True)
class Delete:
    path: str


@dataclass(frozen=True)
class Run:
    """A shell command, its exit code and its output (stdout and stderr merged)."""

    command: str
    exit_code: int
    output: str


@dataclass(frozen=True)
class Grep:
    """A search of the tree: a pattern and the matching lines (no file is read)."""

    pattern: str
    where: str
    output: str


Step = Ask | Say | Todo | Read | Write | Edit | Delete | Run | Grep


def _function(module: str) -> str:
    return (
        f"{NOUNS[module]}_total"
        if module in ("cart", "orders", "invoices")
        else (f"apply_{NOUNS[module]}")
    )


def module_source(module: str, rng: random.Random) -> str:
    """A module of 120-220 lines: dataclasses, helpers, the task's function."""
    noun = NOUNS[module]
    lines = [
        f'"""{module.capitalize()}: the {noun} rules of the shop backend."""',
        "",
        "from __future__ import annotations",
        "",
        "import logging",
        "from dataclasses import dataclass, field",
        "from decimal import ROUND_HALF_UP, Decimal",
        "",
        "from shop.db import Session, fetch_rows",
        "",
        "log = logging.getLogger(__name__)",
        f"CACHE_TTL_SECONDS = {rng.choice((30, 60, 300))}",
        "",
    ]
    for k in range(rng.randint(7, 12)):
        name = f"{noun}_{rng.choice(('rule', 'line', 'entry', 'record', 'batch'))}_{k}"
        lines += [
            "",
            "@dataclass(frozen=True)",
            f"class {name.title().replace('_', '')}:",
            f'    """One {noun} {k}: what the {module} service stores per row."""',
            "",
            "    sku: str",
            "    quantity: int = 1",
            f"    amount: Decimal = Decimal('{rng.randint(1, 999)}.{rng.randint(10, 99)}')",
            "    tags: list[str] = field(default_factory=list)",
            "",
            "",
            f"def load_{name}(session: Session, sku: str) -> list[dict[str, object]]:",
            f'    """Rows of {name} for ``sku`` (newest first)."""',
            f"    rows = fetch_rows(session, '{module}_{k}', sku=sku, limit={rng.randint(10, 500)})",  # noqa: E501
            "    if not rows:",
            f"        log.info('no {name} rows for %s', sku)",
            "    return sorted(rows, key=lambda row: row['created_at'], reverse=True)",
            "",
        ]
    lines += [
        "",
        f"def {_function(module)}(rows: list[dict[str, object]], threshold: Decimal) -> Decimal:",
        f'    """The {noun} total of ``rows`` above ``threshold``."""',
        "    total = sum((Decimal(str(row['amount'])) for row in rows), Decimal(0))",
        "    if total > threshold:",
        "        total -= threshold",
        "    return total.quantize(Decimal('0.01'))",
        "",
    ]
    return "\n".join(lines) + "\n"


def test_source(module: str, rng: random.Random) -> str:
    lines = [f'"""Tests of shop.{module}."""', "", "from decimal import Decimal", ""]
    lines += [f"from shop.{module} import {_function(module)}", ""]
    for k in range(rng.randint(6, 14)):
        lines += [
            "",
            f"def test_{NOUNS[module]}_case_{k}() -> None:",
            f"    rows = [{{'amount': '{rng.randint(1, 90)}.00', 'sku': 'sku-{rng.randint(100, 999)}'}}]",  # noqa: E501
            f"    assert {_function(module)}(rows, Decimal('{rng.randint(100, 900)}')) > 0",
        ]
    return "\n".join(lines) + "\n"


def _log_lines(rng: random.Random, module: str, count: int) -> list[str]:
    levels = ("INFO", "DEBUG", "INFO", "WARNING")
    return [
        f"{levels[rng.randrange(4)]:<8} shop.{module}:{module}.py:{rng.randint(20, 200)} "
        f"{rng.choice(('loaded', 'cached', 'priced', 'synced', 'skipped'))} sku-{rng.randint(1000, 9999)} "  # noqa: E501
        f"in {rng.randint(1, 90)} ms (batch {rng.randint(1, 40)}/{rng.randint(40, 80)})"
        for _ in range(count)
    ]


def pytest_output(
    rng: random.Random, root: str, files: list[str], failing: str | None, error: str, quiet: bool
) -> str:
    """A pytest run over ``files``; ``failing``: the test id that fails (with ``error``, its
    ``E`` line, in the middle of captured logs)."""
    head = [
        "=" * 29 + " test session starts " + "=" * 30,
        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
        f"rootdir: {root}",
        "configfile: pyproject.toml",
        "plugins: anyio-4.4.0, cov-5.0.0",
        f"collected {len(files) * 9} items",
        "",
    ]
    body: list[str] = []
    passed = 0
    stop = failing.split("::")[0] if failing else None
    for path in files:
        if path == stop:
            body.append(f"{path} {'.' * rng.randint(2, 6)}F")
            passed += body[-1].count(".")
            break
        dots = "." * rng.randint(6, 14)
        passed += len(dots)
        body.append(f"{path} {dots}" if not quiet else dots)
    if failing is None:
        return "\n".join(
            [
                *head,
                *body,
                f"{'=' * 20} {passed} passed in {rng.randint(1, 9)}.{rng.randint(10, 99)}s {'=' * 20}",  # noqa: E501
            ]
        )
    module = failing.split("/test_")[1].split(".py")[0].removesuffix("_regressions")
    name = failing.split("::")[1]
    tail = [
        "",
        "=" * 35 + " FAILURES " + "=" * 35,
        f"{'_' * 30} {name} {'_' * 30}",
        "",
        f"    def {name}() -> None:",
        "        rows = [{'amount': '120.00', 'sku': 'sku-4411'}]",
        f">       assert {_function(module)}(rows, Decimal('250')) == Decimal('120.00')",
        f"E       {error}",
        "",
        f"{failing.split('::')[0]}:{rng.randint(20, 140)}: {error.split(':')[0]}",
        "-" * 30 + " Captured log call " + "-" * 31,
        *_log_lines(rng, module, rng.randint(25, 60)),
        "=" * 30 + " short test summary info " + "=" * 30,
        f"FAILED {failing} - {error}",
        "!" * 30 + " stopping after 1 failures " + "!" * 30,
        f"{'=' * 20} 1 failed, {passed} passed in {rng.randint(1, 9)}.{rng.randint(10, 99)}s {'=' * 20}",  # noqa: E501
    ]
    return "\n".join([*head, *body, *tail])


class Planner:
    """Plans one session: the steps, and the files as they stand."""

    def __init__(self, seed: int, size: int) -> None:
        self.rng = random.Random(f"agent-work:{seed}")
        self.size = size
        self.files: dict[str, str] = {}
        self.steps: list[Step] = []
        self.messages = 0  # about two per tool step: a rough count of what a render makes
        self.modules = list(MODULES)
        self.rng.shuffle(self.modules)
        self.done: list[str] = []
        self.tested: list[str] = []
        self.migrations = 0

    def add(self, step: Step) -> None:
        self.steps.append(step)
        self.messages += 1 if isinstance(step, Ask | Say) else 2

    def file(self, path: str) -> str:
        if path not in self.files:
            module = path.rsplit("/", 1)[-1].removeprefix("test_").removesuffix(".py")
            make = test_source if path.startswith("tests/") else module_source
            self.files[path] = make(module, self.rng)
        return self.files[path]

    def read(self, path: str, part: bool = False) -> None:
        content = self.file(path)
        lines = None
        if part:
            count = content.count("\n")
            first = self.rng.randint(1, max(1, count - 40))
            lines = (first, min(count, first + self.rng.randint(20, 40)))
        self.add(Read(path, content, lines))

    def edit(self, path: str, old: str, new: str, *, found: bool = True) -> None:
        content = self.file(path)
        assert old in content
        if not found:
            self.add(Edit(path, old.replace("    ", "  ", 1), new, False, content))
            return
        self.files[path] = content.replace(old, new, 1)
        self.add(Edit(path, old, new, True, self.files[path]))

    def write(self, path: str, content: str) -> None:
        old = self.files.get(path)
        self.files[path] = content
        self.add(Write(path, content, old is None, old or ""))

    def run(self, command: str, exit_code: int, output: str) -> None:
        self.add(Run(command, exit_code, output))

    def todo(self, items: list[str], done: int) -> None:
        status = ["completed" if n < done else "in_progress" if n == done else "pending"
                  for n in range(len(items))]  # fmt: skip
        self.add(Todo(tuple(zip(items, status, strict=True))))

    def suite(self, failing: str | None, error: str = "") -> None:
        files = [f"tests/test_{m}.py" for m in self.tested]
        exit_code = 1 if failing else 0
        self.run(
            "pytest -x tests",
            exit_code,
            pytest_output(self.rng, "{ROOT}", files, failing, error, False),
        )

    def task(self, number: int) -> None:
        rng = self.rng
        module = self.modules[number % len(self.modules)]
        src, test = f"src/shop/{module}.py", f"tests/test_{module}.py"
        func, noun = _function(module), NOUNS[module]
        n, p = rng.choice((120, 250, 500, 900, 1500)), rng.choice((2, 3, 4))
        asks = (
            f"Orders over {n} EUR must not be charged twice in `{func}` ({src}); a customer "
            f"was billed {n + 37}.40 instead of {n}. Fix it and add a regression test.",
            f"`{func}` crashes on an empty {noun} list (KeyError 'sku-{n}' in the logs from "
            f"last night). Fix it and cover it with a test.",
            f"Make `{func}` round to {p} decimal places half-up; the finance export is off by "
            f"a cent on {n} invoices this month.",
            f"The {noun} cache in {src} never expires; give it a TTL of {n} seconds, and test it.",
        )
        self.add(Ask(asks[number % len(asks)]))
        plan = [
            f"Reproduce the {noun} bug with a failing test",
            f"Fix {func} in {src}",
            f"Run the whole suite, ruff and mypy after the {noun} fix",
            f"Note the change in CHANGELOG.md (task {number + 1})",
        ]
        self.todo(plan, 0)
        if rng.random() < 0.7:
            self.add(
                Grep(f"def {func}", "src", f"{src}:{self.file(src).count(chr(10)) - 5}:def {func}(")
            )
        self.read(src)
        self.read(test, part=test in self.files and rng.random() < 0.5)
        self.file(test)
        if test not in self.tested:
            self.tested.append(test)
        failing_name = f"test_{noun}_regression_{number}"
        new_test = (
            f"\n\ndef {failing_name}() -> None:\n"
            "    rows = [{'amount': '120.00', 'sku': 'sku-4411'}]\n"
            f"    assert {func}(rows, Decimal('250')) == Decimal('120.00')\n"
        )
        if rng.random() < 0.3:
            test = f"tests/test_{module}_regressions.py"
            self.write(test, test_source(module, rng) + new_test)
            self.tested.append(test)
        else:
            last = self.files[test].rstrip("\n").rsplit("\n", 1)[-1]
            self.edit(test, last, last + new_test.rstrip("\n"))
        error = rng.choice((
            f"AssertionError: assert Decimal('{n + 37}.40') == Decimal('120.00')",
            f"KeyError: 'sku-{n}'",
            f"decimal.InvalidOperation: [<class 'decimal.ConversionSyntax'>] (sku-{n})",
        ))  # fmt: skip
        failing = f"{test}::{failing_name}"
        single = f"pytest -x {test} -q"
        self.run(single, 1, pytest_output(rng, "{ROOT}", [test], failing, error, True))
        self.todo(plan, 1)
        old = "    if total > threshold:\n        total -= threshold\n"
        new = (
            "    if not rows:\n        return Decimal(0)\n"
            f"    if total > threshold and threshold > {number}:\n        total -= threshold\n"
        )
        if old not in self.files[src]:
            old = self.files[src].rstrip("\n").rsplit("\n", 1)[-1]
            new = old + f"  # checked (task {number})"
        if rng.random() < 0.3:
            self.edit(src, old, new, found=False)
            self.read(src, part=True)
        self.edit(src, old, new)
        if rng.random() < 0.35:
            self.add(Ask(f"Keep the public signature of {func} as it is, the webhooks "
                         f"call it (ticket #{rng.randint(1000, 9999)}).", steering=True))  # fmt: skip  # noqa: E501
        self.run(single, 0, pytest_output(rng, "{ROOT}", [test], None, "", True))
        self.todo(plan, 2)
        if len(self.done) > 1 and rng.random() < 0.45:
            other = rng.choice(self.done)
            other_test = f"tests/test_{other}.py"
            self.suite(
                f"{other_test}::test_{NOUNS[other]}_case_0",
                f"TypeError: {_function(other)}() missing 1 required positional argument: 'threshold'",  # noqa: E501
            )
            self.read(f"src/shop/{other}.py", part=True)
            last = self.files[f"src/shop/{other}.py"].rstrip("\n").rsplit("\n", 1)[-1]
            self.edit(f"src/shop/{other}.py", last, last + f"  # threshold from {module}")
        self.suite(None)
        lint = f"ruff check {src}"
        if rng.random() < 0.4:
            self.run(
                lint,
                1,
                f"{src}:7:38: F401 [*] `decimal.ROUND_HALF_UP` imported but unused\nFound 1 error.\n[*] 1 fixable with the `--fix` option.",  # noqa: E501
            )
            self.edit(
                src, "from decimal import ROUND_HALF_UP, Decimal\n", "from decimal import Decimal\n"
            )
        self.run(lint, 0, "All checks passed!")
        typing = f"mypy {src}"
        if rng.random() < 0.3:
            self.run(
                typing,
                1,
                f'{src}:{rng.randint(100, 180)}: error: Unsupported operand types for > ("Decimal" and "int")  [operator]\nFound 1 error in 1 file (checked 1 source file)',  # noqa: E501
            )
            self.run(
                typing + " --show-error-codes",
                1,
                f'{src}:{rng.randint(100, 180)}: error: Unsupported operand types for > ("Decimal" and "int")  [operator]\nFound 1 error in 1 file (checked 1 source file)',  # noqa: E501
            )
            old_line = self.files[src].rstrip("\n").rsplit("\n", 1)[-1]
            self.edit(src, old_line, old_line + "  # Decimal")
        self.run(typing, 0, "Success: no issues found in 1 source file")
        for command, code, output in self.extras(module, n):
            self.run(command, code, output)
        if rng.random() < 0.35:
            self.migrations += 1
            path = f"migrations/{self.migrations:04d}_{module}_{noun}_ttl.sql"
            self.write(
                path,
                f"-- {module}: keep {noun} rows {n} seconds\nALTER TABLE {module} ADD COLUMN expires_at TIMESTAMP;\nCREATE INDEX ix_{module}_expires ON {module} (expires_at);\n",  # noqa: E501
            )
            self.run(
                "alembic upgrade head",
                0,
                f"INFO  [alembic.runtime.migration] Running upgrade -> {self.migrations:04d}, {module} ttl",  # noqa: E501
            )
        if rng.random() < 0.3:
            self.write(
                f"docs/{module}.md",
                f"# {module.capitalize()}\n\n"
                + "\n".join(
                    f"- rule {k}: {noun} rows over {n + k} EUR are checked twice."
                    for k in range(30)
                )
                + "\n",
            )
        changelog = self.files.get("CHANGELOG.md", "# Changelog\n")
        self.write(
            "CHANGELOG.md", changelog + f"\n- {module}: {func} fixed (task {number + 1}, {n} EUR)\n"
        )
        self.run(
            "git diff --stat",
            0,
            f" {src} | {rng.randint(3, 12)} ++++--\n {test} | {rng.randint(4, 9)} ++++\n CHANGELOG.md | 1 +\n 3 files changed",  # noqa: E501
        )
        if rng.random() < 0.15 and self.done:
            gone = f"src/shop/{self.done[0]}_legacy.py"
            self.write(gone, "# legacy shim, to be removed\n")
            self.add(Delete(gone))
        self.todo(plan, len(plan))
        self.add(Say(f"Done: {func} in {src} is fixed, {test} covers it, the suite passes."))
        self.done.append(module)

    def extras(self, module: str, n: int) -> Iterator[tuple[str, int, str]]:
        rng = self.rng
        pool = [
            (f"python -m shop.cli {module} --dry-run --limit {n}", 0, "\n".join(f"would reprice sku-{rng.randint(1000, 9999)}: {rng.randint(1, 500)}.{rng.randint(10, 99)} EUR" for _ in range(rng.randint(20, 50)))),  # noqa: E501
            (f"python -m shop.cli {module} --since yesterday", 2, f"usage: shop {module} [-h] [--dry-run] [--limit N]\nshop {module}: error: unrecognized arguments: --since yesterday"),  # noqa: E501
            (f"git log --oneline -5 -- src/shop/{module}.py", 0, "\n".join(f"{rng.randrange(16**7):07x} {module}: change {k}" for k in range(5))),  # noqa: E501
            (f"grep -rn 'TODO' src/shop/{module}.py", 1, ""),
            ("curl -s localhost:8000/health", 7, ""),
            (f"sqlite3 var/shop.db 'select count(*) from {module}'", 0, str(rng.randint(100, 90_000))),  # noqa: E501
            (f"python -c 'import shop.{module}; print(shop.{module}.CACHE_TTL_SECONDS)'", 0, str(n)),  # noqa: E501
            ("git status --short", 0, f" M src/shop/{module}.py\n M CHANGELOG.md"),
            ("ls src/shop", 0, "\n".join(sorted(f"{m}.py" for m in MODULES))),
            (f"wc -l src/shop/{module}.py tests/test_{module}.py", 0, f"  {rng.randint(120, 220)} src/shop/{module}.py\n   {rng.randint(30, 90)} tests/test_{module}.py"),  # noqa: E501
        ]  # fmt: skip
        return iter(rng.sample(pool, rng.randint(2, 4)))

    def plan(self) -> list[Step]:
        number = 0
        while self.messages < self.size:
            self.task(number)
            number += 1
        self.add(Ask("Thanks. Which files did you change today, and is the suite green?"))
        return self.steps


def plan_session(seed: int, size: int) -> list[Step]:
    """The steps of one session (see the module's docstring)."""
    return Planner(seed, size).plan()
