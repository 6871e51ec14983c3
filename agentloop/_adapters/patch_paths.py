"""The paths a Codex-style patch touches (``*** Begin Patch`` … ``*** End Patch``), and the patch
inside a shell command that feeds it to ``apply_patch``.

A patch names each file once, in a header: ``*** Add File: <path>`` creates it, ``*** Update
File: <path>`` edits it (followed by ``*** Move to: <new path>``: a rename, so the old path is
deleted and the new one written), ``*** Delete File: <path>`` deletes it. Paths are relative to
the directory the patch was applied in (a ``workdir``, or a ``cd <dir> &&`` before the command).
"""

from __future__ import annotations

import posixpath
import re
import shlex

from agentloop._core.values.tool_facts import FileAction, FileTouched

__all__ = ["BEGIN", "patch_facts", "patch_in_command"]

BEGIN = "*** Begin Patch"
_HEADER = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.+?)\s*$")
_ACTION: dict[str, FileAction] = {
    "Add File": "created",
    "Update File": "edited",
    "Delete File": "deleted",
}
_HEREDOC = re.compile(
    r"^\s*(?:cd\s+(?P<dir>'[^']*'|\"[^\"]*\"|\S+)\s*&&\s*)?apply_patch\s*<<-?\s*"
    r"(?P<q>['\"]?)(?P<tag>\w+)(?P=q)[^\n]*\n(?P<patch>.*?)\n\s*(?P=tag)\s*$",
    re.S,
)


def _under(base: str | None, path: str) -> str:
    if not base or posixpath.isabs(path):
        return path
    return posixpath.normpath(posixpath.join(base, path))


def patch_facts(patch: str, base: str | None = None) -> tuple[FileTouched, ...]:
    """The files ``patch`` creates, edits, deletes or moves, in its order (relative paths
    joined to ``base`` when one is given)."""
    out: list[FileTouched] = []
    for line in patch.splitlines():
        match = _HEADER.match(line)
        if match is None:
            continue
        kind, path = match[1], _under(base, match[2])
        if kind == "Move to":
            if out and out[-1].action == "edited":
                out[-1] = FileTouched(out[-1].path, "deleted")
            out.append(FileTouched(path, "written"))
        else:
            out.append(FileTouched(path, _ACTION[kind]))
    return tuple(out)


def patch_in_command(script: str) -> tuple[str, str | None] | None:
    """The patch a shell script applies with ``apply_patch`` (a heredoc, or the patch as its
    one argument) and the directory it ``cd``\\ s into first; ``None`` when it applies none."""
    match = _HEREDOC.match(script)
    if match is not None:
        where = match["dir"]
        return match["patch"], shlex.split(where)[0] if where else None
    if BEGIN not in script:
        return None
    try:
        words = shlex.split(script)
    except ValueError:
        return None
    if len(words) == 2 and words[0] == "apply_patch" and words[1].lstrip().startswith(BEGIN):
        return words[1], None
    return None
