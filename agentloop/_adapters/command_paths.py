"""The files a simple shell command read, deleted or moved, read from the command line.

Agents with no file-reading tool (Codex) read with ``cat``, ``sed -n 'A,Bp'``, ``head``,
``tail``, ``nl``; deletes and moves are shell commands in every agent (``rm``, ``mv``, ``git rm``,
``git mv``). Only a command that ended well is read, and only a simple one: one program after an
optional ``cd <dir> &&``, with no pipe, list, redirection or substitution (``cat a | head`` or
``cat a > b`` say nothing certain about a file). Globs are left alone: a pattern names no file.
"""

from __future__ import annotations

import posixpath
import re
import shlex

from agentloop._core.values.tool_facts import FileAction, FileTouched

__all__ = ["command_paths"]

_SHELL_SYNTAX = re.compile(r"[|;&<>`$(){}*?\[\]\n]")
_SED_PRINT = re.compile(r"^\d+(?:,\d+)?p$")


def _under(base: str | None, path: str) -> str:
    if not base or posixpath.isabs(path):
        return path
    return posixpath.normpath(posixpath.join(base, path))


def _operands(words: list[str], with_value: tuple[str, ...] = ()) -> list[str] | None:
    """The operands after the options (``None`` when an option is not understood)."""
    out: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in with_value:
            skip = True
        elif word == "--" or not word.startswith("-") or word == "-":
            out.append(word)
        elif not re.fullmatch(r"-[A-Za-z0-9]+|--[a-z-]+", word):
            return None
    return [w for w in out if w not in ("--", "-")]


def _facts(words: list[str]) -> list[tuple[str, FileAction]]:
    program, args = words[0], words[1:]
    if program == "git" and args[:1] in (["rm"], ["mv"]):
        if "--cached" in args:
            return []  # unstaged only: the file stays
        program, args = f"git {args[0]}", args[1:]
    if program in ("cat", "nl"):
        operands = _operands(args, ("-b", "-s", "-w") if program == "nl" else ())
        return [(p, "read") for p in operands or ()]
    if program == "sed":
        # sed -n 'A,Bp' FILE: the lines A to B of one file
        if len(args) == 3 and args[0] == "-n" and _SED_PRINT.match(args[1]):
            return [(args[2], "read_part")]
        return []
    if program in ("head", "tail"):
        operands = _operands(args, ("-n", "-c"))
        return [(p, "read_part") for p in operands or ()]
    if program in ("rm", "git rm"):
        return [(p, "deleted") for p in _operands(args) or ()]
    if program in ("mv", "git mv"):
        operands = _operands(args)
        if operands is None or len(operands) != 2:
            return []
        source, target = operands
        if target.endswith("/"):  # into a directory, under the same name
            target += posixpath.basename(source.rstrip("/"))
        return [(source, "deleted"), (target, "written")]
    return []


def command_paths(command: str, base: str | None = None) -> tuple[FileTouched, ...]:
    """What the simple shell ``command`` (which ended well) did to files: read (``read_part``
    for a line range, a head or a tail), deleted, or moved (the old path deleted, the new one
    written); relative paths joined to ``base`` (a working directory) when one is given."""
    match = re.match(r"\s*cd\s+(\S+)\s*&&\s*", command)
    if match is not None:
        where = match[1].strip("'\"")
        base = _under(base, where) if base else where
        command = command[match.end() :]
    if _SHELL_SYNTAX.search(command) is not None:
        return ()
    try:
        words = shlex.split(command)
    except ValueError:
        return ()
    if not words:
        return ()
    return tuple(FileTouched(_under(base, path), action) for path, action in _facts(words))
