"""The house keeps its plan: rooms import only what ARCHITECTURE.md allows, no cycles, no god files.

The import graph is read statically (every ``import``/``from … import`` anywhere in a module,
lazy ones inside functions included), so a rule broken in a rarely-run branch is still caught.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentloop", "sessions")
MAX_LINES = 600

# What each room may import (besides the standard library and third-party packages).
# "agentloop._errors" and the package roots are shared by all.
ALLOWED: dict[str, tuple[str, ...]] = {
    "sessions": ("sessions",),
    # The pure core: values and decisions. The one cut rule comes from sessions' dependency-free
    # module; nothing else of the store, the SDK, the tokenizer, the loop, the agent or the CLI.
    "agentloop._core": ("agentloop._core", "sessions._cut"),
    # The core's own rooms, bottom up: each imports only the rooms below it (its map: the
    # room's __init__ docstring). compaction_core, at the top, composes them all.
    "agentloop._core.values": ("agentloop._core.values",),
    "agentloop._core.measuring": ("agentloop._core.values", "agentloop._core.measuring"),
    "agentloop._core.cutting": (
        "agentloop._core.values",
        "agentloop._core.cutting",
        "sessions._cut",
    ),
    "agentloop._core.facts": (
        "agentloop._core.values",
        "agentloop._core.cutting",
        "agentloop._core.facts",
    ),
    "agentloop._core.compaction": (
        "agentloop._core.values",
        "agentloop._core.measuring",
        "agentloop._core.cutting",
        "agentloop._core.facts",
        "agentloop._core.compaction",
    ),
    "agentloop._core.strategies": (
        "agentloop._core.values",
        "agentloop._core.measuring",
        "agentloop._core.cutting",
        "agentloop._core.facts",
        "agentloop._core.compaction",
        "agentloop._core.strategies",
    ),
    "agentloop._adapters": ("agentloop._core", "agentloop._adapters", "sessions"),
    "agentloop._loop": ("agentloop._core", "agentloop._adapters", "agentloop._loop", "sessions"),
    "agentloop._agent": (
        "agentloop._core",
        "agentloop._adapters",
        "agentloop._loop",
        "agentloop._agent",
        "sessions",
    ),
    "agentloop._cli": ("agentloop", "sessions"),  # the face may use every room
    # Other frameworks' adapters: what a user of the library could write (narrowed below to the
    # public API of both packages: names their roots export, and the room's own modules).
    "agentloop.integrations": ("agentloop", "sessions"),
    "agentloop.testing": ("agentloop._core", "agentloop._adapters"),
}
SHARED = ("agentloop._errors", "agentloop._sessions")
# agentloop takes the store's names through agentloop._sessions (so that a user's own module
# called `sessions` cannot shadow it): read as imports of `sessions` itself.
STORE_ALIAS = "agentloop._sessions"
# Third-party imports the pure core must never make (its purity is about I/O and the SDK).
CORE_FORBIDDEN_THIRD_PARTY = ("anthropic", "tiktoken", "sqlite3", "httpx", "threading", "asyncio")


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted(ROOT.joinpath(package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), path


def _exported_from(package: str, name: str) -> str:
    """The module a package's lazy ``__init__`` takes ``name`` from (the package if none)."""
    exports: dict[str, str] = importlib.import_module(package)._EXPORTS
    return exports.get(name, package)


def _imports(name: str, path: Path) -> set[str]:
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module == STORE_ALIAS:
                module = "sessions"
            if module in PACKAGES:  # a lazy re-export: the module that really defines the name
                found |= {_exported_from(module, alias.name) for alias in node.names}
                continue
            found.add(module)
            # `from pkg import sub` may import a submodule
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    modules = dict(_modules())
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = {m for m in _imports(name, path) if m in modules}
    return graph


def _room(module: str) -> str:
    for room in sorted(ALLOWED, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return module


def test_every_room_imports_only_what_it_may() -> None:
    broken: list[str] = []
    for name, path in _modules():
        if name in PACKAGES or name in SHARED or name == "agentloop.__main__":
            continue
        allowed = ALLOWED[_room(name)]
        for target in _imports(name, path):
            if target.split(".")[0] not in PACKAGES or target in PACKAGES:
                continue
            if any(target == s or target.startswith(s + ".") for s in SHARED):
                continue
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                broken.append(f"{name} imports {target}")
    assert broken == []


def test_the_integrations_use_only_the_public_api() -> None:
    private = [
        f"{name} imports {module}"
        for name, path in _modules()
        if _room(name) == "agentloop.integrations"
        for module in _imported_modules(path)
        if module.split(".")[0] in PACKAGES
        and module not in (*PACKAGES, STORE_ALIAS)
        and not module.startswith("agentloop.integrations")
    ]
    assert private == []


def _imported_modules(path: Path) -> set[str]:
    """The absolute modules named by ``path``'s import statements (relative ones excluded)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def test_the_core_makes_no_io_imports() -> None:
    for name, path in _modules():
        if not _room(name).startswith("agentloop._core"):
            continue
        tops = {target.split(".")[0] for target in _imports(name, path)}
        assert not tops & set(CORE_FORBIDDEN_THIRD_PARTY), (name, tops)


def test_there_is_no_import_cycle() -> None:
    graph = _graph()
    # A package's __init__ re-exporting its children is not a cycle of concerns.
    edges = {
        source: {t for t in targets if not (source in PACKAGES and t.startswith(source + "."))}
        for source, targets in graph.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert cycles == []


def test_no_source_file_is_a_god_module() -> None:
    too_long = {
        str(path.relative_to(ROOT)): n
        for _, path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}


def test_the_rule_checker_sees_a_broken_rule() -> None:
    # The checks above read real source; prove the reader finds lazy imports inside functions.
    source = ROOT / "agentloop" / "_loop" / "conversation_compacter.py"
    assert "agentloop._adapters.tokens" in _imports(
        "agentloop._loop.conversation_compacter", source
    )
    assert _room("agentloop._core.compaction_core") == "agentloop._core"
    assert _room("agentloop._core.values.blocks") == "agentloop._core.values"
    assert _room("agentloop._cli.repl") == "agentloop._cli"
