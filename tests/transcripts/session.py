"""The session writer: plays a coding agent's session turn by turn, planting scheduled events.

A session is a run of *tasks*: a user request, 3-10 tool steps (an assistant message with one
or more tool calls, then the user message with their results), and the agent's closing reply.
Events (a PDF request, a screenshot, a web search, a buried error, steering, an interruption)
are scheduled at fractions of the target size and placed at the first point where they fit.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from transcripts import outputs, prose
from transcripts.code import ENTITIES, source_for
from transcripts.facts import BuriedError, Document, Facts, Image, Request, Search, Transcript
from transcripts.media import b64, pdf, png

Block = dict[str, Any]
EventName = Literal[
    "pdf_request", "screenshot_request", "photo_request", "search_request", "placeholder",
    "pasted_log", "module_error", "traceback", "steering", "interrupted_tool", "tool_image",
]  # fmt: skip
REQUEST_EVENTS = frozenset(
    {"pdf_request", "screenshot_request", "photo_request", "search_request", "placeholder",
     "pasted_log"}
)  # fmt: skip
STEP_EVENTS = frozenset(get_args(EventName)) - REQUEST_EVENTS

PROJECT = (
    "src/app/__init__.py", "src/app/db.py", "src/app/config.py", "src/app/worker.py",
    "src/app/cli.py", "src/app/api/routes.py", "src/app/api/schemas.py",
    "src/app/services/billing.py", "src/app/services/notify.py", "tests/conftest.py",
    "tests/test_db.py", "tests/test_api.py", "tests/test_billing.py", "pyproject.toml",
    "docs/architecture.md", ".github/workflows/ci.yml",
    *(f"src/app/services/{entity}s.py" for entity in ENTITIES),
    *(f"tests/test_{entity}s.py" for entity in ENTITIES),
)  # fmt: skip

SYSTEM = (
    "You are a coding agent working in the repository at /home/dev/shop (a Python 3.11 shop "
    "backend: SQLite, httpx, pydantic). Use the tools to read, search, edit and run code. "
    "Read a file before editing it; prefer small edits (edit_file) over rewriting files; run "
    "the relevant tests after every change and report failures honestly. Never commit. When "
    "the user sends a message while tools run, it takes precedence over the earlier plan."
)

TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a file of the repository; lines are numbered.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["path"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace one exact occurrence of old_string by new_string in a file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
    {
        "name": "write_file",
        "description": "Create or overwrite a file with the given content.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "run_command",
        "description": "Run a shell command in the repository and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
            "required": ["command"],
        },
    },
    {
        "name": "grep",
        "description": "Search files for a literal pattern; prints path:line:text.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
        },
    },
    {
        "name": "list_files",
        "description": "List the files under a directory.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
]

_ID_CHARS = string.ascii_letters + string.digits


@dataclass
class Options:
    """What a session contains and where its events go (fractions of the target size)."""

    events: list[tuple[float, EventName]] = field(default_factory=list)
    thinking: float = 0.0
    """Chance that an assistant step opens with a thinking block."""
    redacted_thinking: float = 0.0
    autonomous_after_last_event: bool = False
    """After the last event, the current task never ends: no newer request is typed."""
    pasted_log_chars: int = 100_000


class SessionWriter:
    def __init__(self, name: str, seed: int, size: int, options: Options) -> None:
        self.name, self.seed, self.size, self.options = name, seed, max(size, 4), options
        self.rng = random.Random(f"{name}:{seed}")
        self.messages: list[dict[str, Any]] = []
        self.files: dict[str, str] = {}
        self.paths: list[str] = []
        self.written: list[str] = []
        self.requests: list[Request] = []
        self.errors: list[BuriedError] = []
        self.searches: list[Search] = []
        self.documents: list[Document] = []
        self.images: list[Image] = []
        self.thinking = self.redacted = 0
        self.interrupted: list[str] = []
        self.placeholders: list[int] = []
        self.ids: set[str] = set()
        self.events = sorted(options.events, key=lambda item: item[0])
        self.steps_left = 0
        self.autonomous = False
        self.entity = self.rng.choice(ENTITIES)
        self.used_requests: set[str] = set()
        self.used_searches: set[int] = set()
        self.on_next_user: list[Callable[[int], None]] = []
        """Facts waiting for the index of the user message that will carry them."""

    # -- plumbing ---------------------------------------------------------------------------

    def new_id(self, prefix: str = "toolu_01") -> str:
        while True:
            candidate = prefix + "".join(self.rng.choices(_ID_CHARS, k=22))
            if candidate not in self.ids:
                self.ids.add(candidate)
                return candidate

    def user(self, blocks: list[Block]) -> int:
        self.messages.append({"role": "user", "content": blocks})
        index = len(self.messages) - 1
        for record in self.on_next_user:
            record(index)
        self.on_next_user.clear()
        return index

    def assistant(self, blocks: list[Block]) -> int:
        self.messages.append({"role": "assistant", "content": blocks})
        return len(self.messages) - 1

    def due(self, kinds: frozenset[str] | None) -> EventName | None:
        """The next scheduled event if its time has come (and it fits here)."""
        if not self.events:
            return None
        at, name = self.events[0]
        if len(self.messages) < at * self.size:
            return None
        if kinds is not None and name not in kinds:
            return None
        self.events.pop(0)
        if not self.events and self.options.autonomous_after_last_event:
            self.autonomous = True
        return name

    def finished(self) -> bool:
        return len(self.messages) >= self.size and not self.events

    def pick_path(self, *, python: bool = True) -> str:
        choices = [p for p in PROJECT if p.endswith(".py")] if python else list(PROJECT)
        return self.rng.choice(choices)

    def content_of(self, path: str) -> str:
        if path not in self.files:
            size = self.rng.choice((1500, 3000, 5000, 8000, 12000))
            self.files[path] = source_for(self.rng, path, size)
        return self.files[path]

    def fill(self, template: str, **extra: str) -> str:
        entity = self.rng.choice(ENTITIES)
        values = {
            "entity": entity,
            "Entity": entity.capitalize(),
            "path": self.pick_path(),
            "name": f"list_{entity}s",
            "old": f"get_{entity}",
            "what": self.rng.choice(prose.WHATS),
            "passed": str(self.rng.randint(40, 260)),
        }
        values.update(extra)
        return template.format(**values)

    def unique(self, pool: tuple[str, ...], **extra: str) -> str:
        for _ in range(50):
            text = self.fill(self.rng.choice(pool), **extra)
            if text not in self.used_requests:
                self.used_requests.add(text)
                return text
        text = f"{text} (follow-up {len(self.used_requests)})"
        self.used_requests.add(text)
        return text

    # -- the session ------------------------------------------------------------------------

    def build(self) -> Transcript:
        while True:
            last = self.messages[-1] if self.messages else None
            if last is not None and last["role"] == "user" and self.finished():
                break
            if last is None or last["role"] == "assistant":
                self.start_task(self.due(REQUEST_EVENTS))
            elif self.steps_left <= 0 and not self.autonomous:
                self.finish_task()
            else:
                self.tool_step(self.due(STEP_EVENTS))
                self.steps_left -= 1
        return Transcript(
            name=self.name,
            seed=self.seed,
            messages=self.messages,
            system=SYSTEM,
            tools=TOOLS,
            facts=Facts(
                paths=tuple(dict.fromkeys(self.paths)),
                written_paths=tuple(dict.fromkeys(self.written)),
                requests=tuple(self.requests),
                errors=tuple(self.errors),
                searches=tuple(self.searches),
                documents=tuple(self.documents),
                images=tuple(self.images),
                thinking_blocks=self.thinking,
                redacted_thinking_blocks=self.redacted,
                interrupted_tool_use_ids=tuple(self.interrupted),
                placeholder_indexes=tuple(self.placeholders),
            ),
        )

    def typed(self, text: str, extra: list[Block] | None = None) -> None:
        index = self.user([*(extra or []), {"type": "text", "text": text}])
        self.requests.append(Request(text, index, "typed"))

    def start_task(self, event: EventName | None) -> None:
        # Tasks of 3-10 steps, shorter in a small session so that its events still fit.
        longest = min(10, max(2, self.size // 12))
        self.steps_left = self.rng.randint(max(1, longest // 3), longest)
        if event == "placeholder":
            self.typed(self.unique(prose.REQUESTS))
            self.placeholders.append(self.assistant([{"type": "text", "text": prose.PLACEHOLDER}]))
            self.typed("sorry, hit escape by accident. " + self.unique(prose.REQUESTS))
        elif event == "pdf_request":
            self.pdf_request()
        elif event == "screenshot_request":
            self.image_request("ui")
        elif event == "photo_request":
            self.image_request("noise")
        elif event == "pasted_log":
            self.pasted_log()
        elif event == "search_request":
            self.typed(self.unique(prose.REQUESTS) + " Check the current docs before changing it.")
            self.search_step()
            self.steps_left -= 1
        else:
            self.typed(self.unique(prose.REQUESTS))

    def finish_task(self) -> None:
        text = self.fill(self.rng.choice(prose.FINALS))
        self.assistant([*self.opening(), {"type": "text", "text": text}])

    def opening(self) -> list[Block]:
        """Thinking blocks that may open an assistant message."""
        roll = self.rng.random()
        if roll < self.options.redacted_thinking:
            self.redacted += 1
            data = b64(self.rng.randbytes(self.rng.randint(300, 900)))
            return [{"type": "redacted_thinking", "data": data}]
        if roll < self.options.redacted_thinking + self.options.thinking:
            self.thinking += 1
            signature = b64(self.rng.randbytes(self.rng.randint(180, 360)))
            thought = self.fill(self.rng.choice(prose.THINKING))
            return [{"type": "thinking", "thinking": thought, "signature": signature}]
        return []

    # -- requests with media ------------------------------------------------------------------

    def pdf_request(self) -> None:
        title, sections = self.rng.choice(prose.DOCUMENTS)
        pages = [[heading, "", *lines] for heading, *lines in sections]
        data = b64(pdf(title, pages))
        block = {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": data},
            "title": title,
        }
        text = self.fill(
            "Here's the vendor document. Follow it for the {entity} changes and update {path}."
        )
        self.typed(text, [block])
        self.documents.append(Document(title, len(pages), len(data), len(self.messages) - 1))

    def image_block(self, width: int, height: int, pattern: Any, *, in_result: bool) -> Block:
        data = b64(png(width, height, pattern, self.seed))
        self.on_next_user.append(
            lambda index: self.images.append(Image(width, height, len(data), in_result, index))
        )
        source = {"type": "base64", "media_type": "image/png", "data": data}
        return {"type": "image", "source": source}

    def image_request(self, pattern: Literal["ui", "noise"]) -> None:
        if pattern == "ui":
            block = self.image_block(1280, 800, "ui", in_result=False)
            text = self.fill(
                "This is the admin page for {entity}s after your last change: the totals column "
                "is empty. The data comes from {path}; find out why."
            )
        else:
            block = self.image_block(120, 90, "noise", in_result=False)
            text = self.fill(
                "A customer uploaded this {entity} avatar and it comes out as noise after "
                "resizing. Check the image handling in {path}."
            )
        self.typed(text, [block])

    def pasted_log(self) -> None:
        clock = [0.0]
        lines = []
        size = 0
        while size < self.options.pasted_log_chars:
            line = outputs._log_line(self.rng, clock)
            lines.append(line)
            size += len(line) + 1
        entity = self.rng.choice(ENTITIES)
        text = (
            f"CI log from last night's failing run is below. Why does the {entity} worker die, "
            "and is it the same bug as last week?\n\n```\n"
            + "\n".join(lines)
            + "\n```\n\nIt only started after we bumped httpx to 0.28 in pyproject.toml."
        )
        self.typed(text)

    # -- tool steps -------------------------------------------------------------------------

    def tool_step(self, event: EventName | None) -> None:
        opening = self.opening()
        calls: list[tuple[Block, Block]]
        steering: str | None = None
        if event == "module_error":
            calls = [self.planted_run("module_not_found")]
        elif event == "traceback":
            calls = [self.planted_run("traceback")]
        elif event == "interrupted_tool":
            use = self.tool_use("run_command", {"command": "pytest -x tests/", "timeout": 600})
            self.interrupted.append(use["id"])
            result = self.result(use, prose.INTERRUPTED_TOOL, is_error=True)
            calls = [(use, result)]
            steering = self.unique(prose.STEERING[3:4])
        elif event == "tool_image":
            calls = [self.read_image()]
        else:
            calls = [self.random_call() for _ in range(self.parallel())]
            if event == "steering":
                steering = self.unique(prose.STEERING)
        first = calls[0][0]
        details = {key: str(value) for key, value in first["input"].items()}
        narration = self.fill(self.rng.choice(prose.NARRATION[first["name"]]), **details)
        self.assistant([*opening, {"type": "text", "text": narration}, *(u for u, _ in calls)])
        blocks = [result for _, result in calls]
        if steering is not None:
            blocks.append({"type": "text", "text": steering})
        index = self.user(blocks)
        if steering is not None:
            self.requests.append(Request(steering, index, "steering"))

    def parallel(self) -> int:
        roll = self.rng.random()
        return 1 if roll < 0.7 else 2 if roll < 0.9 else 3

    def tool_use(self, name: str, tool_input: dict[str, Any]) -> Block:
        path = tool_input.get("path")
        if isinstance(path, str) and name in ("read_file", "edit_file", "write_file"):
            self.paths.append(path)
            if name != "read_file":
                self.written.append(path)
        return {"type": "tool_use", "id": self.new_id(), "name": name, "input": tool_input}

    def result(self, use: Block, content: str | list[Block], *, is_error: bool = False) -> Block:
        block: Block = {"type": "tool_result", "tool_use_id": use["id"], "content": content}
        if is_error:
            block["is_error"] = True
        return block

    def random_call(self) -> tuple[Block, Block]:
        kind = self.rng.choices(
            ("read", "grep", "list", "edit", "write", "run"), weights=(24, 10, 4, 24, 10, 28)
        )[0]
        if kind == "read" or (kind == "edit" and not self.files):
            path = self.pick_path(python=self.rng.random() < 0.9)
            use = self.tool_use("read_file", {"path": path})
            return use, self.result(use, outputs.numbered(self.content_of(path)))
        if kind == "grep":
            entity = self.rng.choice(ENTITIES)
            pattern = self.rng.choice((f"def list_{entity}s", f"{entity}_id", "sqlite3.connect"))
            for path in self.rng.sample(PROJECT, 4):
                self.content_of(path)
            use = self.tool_use("grep", {"pattern": pattern, "path": "src"})
            return use, self.result(use, outputs.grep_output(self.rng, pattern, self.files, 40))
        if kind == "list":
            use = self.tool_use("list_files", {"path": "."})
            return use, self.result(use, outputs.listing([*PROJECT, *self.written]))
        if kind == "edit":
            return self.edit()
        if kind == "write":
            return self.write()
        return self.run()

    def edit(self) -> tuple[Block, Block]:
        path = self.rng.choice(list(self.files))
        lines = self.files[path].splitlines()
        start = self.rng.randrange(max(1, len(lines) - 12))
        old = "\n".join(lines[start : start + self.rng.randint(3, 12)])
        if not old.strip() or self.files[path].count(old) != 1:
            old = self.files[path][-300:]
        entity = self.rng.choice(ENTITIES)
        new = re.sub(r"\blimit\b", "page_size", re.sub(r"\bconn\b", "connection", old))
        new += f'\n    log.debug("{entity} sync step done in %.3fs", time.monotonic() - started)'
        self.files[path] = self.files[path].replace(old, new, 1)
        use = self.tool_use("edit_file", {"path": path, "old_string": old, "new_string": new})
        first = self.files[path][: self.files[path].index(new)].count("\n") + 1
        snippet = outputs.numbered(new, start=first)
        text = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{snippet}"
        )
        return use, self.result(use, text)

    def write(self) -> tuple[Block, Block]:
        entity = self.rng.choice(ENTITIES)
        path = self.rng.choice(
            (f"src/app/services/{entity}_export.py", f"src/app/{entity}_retry.py",
             f"tests/test_{entity}_export.py")
        )  # fmt: skip
        size = self.rng.choice((2_000, 3_000, 4_000, 5_000, 7_000, 10_000, 14_000, 20_000))
        content = source_for(self.rng, path, size)
        self.files[path] = content
        use = self.tool_use("write_file", {"path": path, "content": content})
        text = f"File created successfully at: {path} ({len(content.encode()):,} bytes)"
        return use, self.result(use, text)

    def run(self) -> tuple[Block, Block]:
        entity = self.rng.choice(ENTITIES)
        changed = list(dict.fromkeys(self.written))[-3:] or ["src/app/db.py"]
        choice = self.rng.choices(
            ("pytest", "pytest_fail", "diff", "status", "ruff", "mypy", "pip"),
            weights=(26, 14, 14, 8, 10, 8, 4),
        )[0]
        output: str
        failed = False
        if choice == "pytest":
            command = f"pytest -q tests/test_{entity}s.py"
            output = outputs.pytest_passing(self.rng, verbose=self.rng.random() < 0.4)
        elif choice == "pytest_fail":
            command = f"pytest -q tests/test_{entity}s.py"
            output, failed = outputs.pytest_failure(self.rng, entity), True
        elif choice == "diff":
            path = changed[-1]
            content = self.content_of(path)
            lines = content.splitlines()
            start = self.rng.randrange(max(1, len(lines) - 10))
            old = "\n".join(lines[start : start + 6])
            command = f"git diff {path}"
            output = outputs.git_diff(self.rng, path, old, old.replace("limit", "page_size"))
        elif choice == "status":
            command, output = "git status", outputs.git_status(changed)
        elif choice == "ruff":
            command = "ruff check src tests"
            output, failed = outputs.ruff_output(self.rng, changed)
        elif choice == "mypy":
            command = "mypy src"
            output, failed = outputs.mypy_output(self.rng, changed)
        else:
            package = self.rng.choice(("freezegun", "respx", "time-machine"))
            command = f"pip install {package}"
            output = outputs.pip_install(self.rng, package)
        use = self.tool_use("run_command", {"command": command, "timeout": 300})
        if failed:
            output += "\n[exit code 1]"
        return use, self.result(use, output, is_error=failed)

    def planted_run(self, kind: Literal["module_not_found", "traceback"]) -> tuple[Block, Block]:
        taken = " ".join(needle for error in self.errors for needle in error.needles)
        if kind == "module_not_found":
            module = next(
                (m for m, _ in self.rng.sample(outputs.MISSING_MODULES, 8) if f"'{m}'" not in taken)
            )
            planted = outputs.buried_module_error(self.rng, module)
            command = "pytest -v -rN --cov=app tests/"
        else:
            planted = outputs.buried_traceback(self.rng, avoid=taken)
            command = "python -m app.worker --once --queue billing"
        use = self.tool_use("run_command", {"command": command, "timeout": 600})
        text = planted.text + ("\n[exit code 1]" if kind == "module_not_found" else "")

        def record(index: int) -> None:
            error = BuriedError(
                kind, planted.line, planted.needles, planted.offset, len(text), index, use["id"]
            )
            self.errors.append(error)

        self.on_next_user.append(record)
        return use, self.result(use, text, is_error=kind == "module_not_found")

    def read_image(self) -> tuple[Block, Block]:
        entity = self.rng.choice(ENTITIES)
        path = f"docs/img/{entity}_latency.png"
        use = self.tool_use("read_file", {"path": path})
        image = self.image_block(2400, 1350, "chart", in_result=True)
        caption = {"type": "text", "text": f"Image file {path} (2400x1350, PNG)"}
        return use, self.result(use, [caption, image])

    def search_step(self) -> None:
        choices = [i for i in range(len(prose.SEARCHES)) if i not in self.used_searches]
        number = self.rng.choice(choices or range(len(prose.SEARCHES)))
        self.used_searches.add(number)
        query, results, quote = prose.SEARCHES[number]
        server_id = self.new_id("srvtoolu_01")
        entries = [
            {
                "type": "web_search_result",
                "url": url,
                "title": title,
                "encrypted_content": b64(self.rng.randbytes(self.rng.randint(600, 2400))),
                "page_age": self.rng.choice(("2 weeks ago", "March 3, 2025", "1 year ago")),
            }
            for url, title in results
        ]
        cited = results[: 2 if len(results) > 2 else 1]
        citations = [
            {
                "type": "web_search_result_location",
                "url": url,
                "title": title,
                "encrypted_index": b64(self.rng.randbytes(48)),
                "cited_text": quote,
            }
            for url, title in cited
        ]
        read_path = self.pick_path()
        use = self.tool_use("read_file", {"path": read_path})
        blocks: list[Block] = [
            *self.opening(),
            {"type": "text", "text": "I'll check the current documentation first."},
            {"type": "server_tool_use", "id": server_id, "name": "web_search",
             "input": {"query": query}},
            {"type": "web_search_tool_result", "tool_use_id": server_id, "content": entries},
            {"type": "text", "text": "According to the documentation, " + quote.lower(),
             "citations": citations},
            {"type": "text", "text": f"Now let me see how {read_path} does it today."},
            use,
        ]  # fmt: skip
        index = self.assistant(blocks)
        self.searches.append(
            Search(
                query=query,
                urls=tuple(url for url, _ in results),
                titles=tuple(title for _, title in results),
                cited_urls=tuple(url for url, _ in cited),
                message_index=index,
                server_tool_use_id=server_id,
            )
        )
        self.user([self.result(use, outputs.numbered(self.content_of(read_path)))])


def write_session(
    name: str, seed: int, size: int, options: Options | Callable[[], Options]
) -> Transcript:
    resolved = options() if callable(options) else options
    return SessionWriter(name, seed, size, resolved).build()
