"""One place tells content blocks apart: agentloop/_core/values/blocks.py.

Anywhere else in agentloop, code asks the typed predicates (``is_tool_use(block)``...) or hands
the block to a ``BlockRenderer``; reading a block's ``"type"`` by hand is what this test refuses.
The finder is static (the source's syntax tree), so a check in a rarely-run branch is caught too.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DISPATCH = "agentloop/_core/values/blocks.py"

# Reads of a "type" that is not a content block's: checked by hand, each with its reason.
NOT_BLOCKS: dict[str, tuple[int, str]] = {
    "agentloop/_adapters/anthropic_errors.py": (1, "the type of an API error body"),
    "agentloop/_adapters/anthropic_params.py": (
        2,
        "the type of a request's tool_choice and of its thinking setting (parameters, not blocks)",
    ),
    "agentloop/_agent/mcp_config.py": (1, "the type of a server in .mcp.json (stdio or http)"),
    "agentloop/_agent/mcp_tools.py": (
        2,
        "the type of an MCP result's content item (the protocol's, read to make blocks) and of a "
        "tool's JSON schema",
    ),
}

# Block checks that stay outside the dispatch, each with its reason.
PENDING: dict[str, tuple[int, str]] = {
    "agentloop/integrations/langchain.py": (
        4,
        "LangChain's own content items (image_url, tool_call_chunk..., the API's compaction block "
        "in an AIMessage), read to make blocks, and the text blocks of a system message picked "
        "from that translation: an integration sees only agentloop's public API",
    ),
    "agentloop/integrations/pydantic_ai.py": (
        2,
        "an integration sees only agentloop's public API: it translates each block kind to a "
        "pydantic-ai part there",
    ),
}


def _is_type_key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "type"


def _is_kind_call(node: ast.AST) -> bool:
    func = node.func if isinstance(node, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "kind_of"


def _is_kind_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_is_kind_literal(e) for e in node.elts)
    return False


def _tells_kinds_apart(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "get" and bool(node.args) and _is_type_key(node.args[0])
    if isinstance(node, ast.Subscript):
        return isinstance(node.ctx, ast.Load) and _is_type_key(node.slice)
    if isinstance(node, ast.MatchMapping):
        return any(_is_type_key(key) for key in node.keys)
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        return any(map(_is_kind_call, operands)) and any(map(_is_kind_literal, operands))
    return False


def kind_checks(source: str) -> list[int]:
    """Lines of ``source`` that tell blocks apart by hand: ``x.get("type")``, ``x["type"]``
    read, ``case {"type": ...}``, or ``kind_of(x)`` compared with a literal."""
    nodes = ast.walk(ast.parse(source))
    return sorted(
        node.lineno
        for node in nodes
        if isinstance(node, ast.expr | ast.pattern) and _tells_kinds_apart(node)
    )


def _checks_by_file() -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for path in sorted(ROOT.joinpath("agentloop").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name == DISPATCH:
            continue
        lines = kind_checks(path.read_text())
        if lines:
            found[name] = lines
    return found


def test_blocks_are_told_apart_only_in_the_dispatch() -> None:
    found = _checks_by_file()
    expected = {name: count for name, (count, _) in {**NOT_BLOCKS, **PENDING}.items()}
    counts = Counter({name: len(lines) for name, lines in found.items()})
    unexpected = {name: found[name] for name in found if counts[name] > expected.get(name, 0)}
    assert unexpected == {}, (
        "route these block checks through agentloop/_core/values/blocks.py (is_text, is_tool_use, "
        f"is_tool_result... or a BlockRenderer): {unexpected}"
    )


def test_the_exceptions_are_still_needed() -> None:
    """An entry whose checks were routed (or moved) must go: the lists stay true."""
    found = _checks_by_file()
    stale = {
        name: (len(found.get(name, [])), count)
        for name, (count, _) in {**NOT_BLOCKS, **PENDING}.items()
        if len(found.get(name, [])) != count
    }
    assert stale == {}


def test_the_finder_sees_each_kind_of_check() -> None:
    source = """
def f(block, kind_of):
    a = block.get("type") == "text"
    b = block["type"]
    block["type"] = "text"
    c = kind_of(block) in ("tool_use", "server_tool_use")
    match block:
        case {"type": "image"}:
            pass
    d = kind_of(block)
    e = {"type": "text", "text": "built, not read"}
    return a, b, c, d, e
"""
    assert kind_checks(source) == [3, 4, 6, 8]


def test_the_dispatch_itself_reads_the_type() -> None:
    """The finder is not blind: the one dispatch does read block types."""
    assert kind_checks(ROOT.joinpath(DISPATCH).read_text())
