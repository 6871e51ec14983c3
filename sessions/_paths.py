"""Where the store lives: a path given in code, else ``$AGENTLOOP_HOME``, else the user data dir."""

from __future__ import annotations

import os
import re
from pathlib import Path

STORE_FILENAME = "sessions.db"
HOME_ENV = "AGENTLOOP_HOME"
DIR_MODE = 0o700
FILE_MODE = 0o600


def agentloop_home() -> Path:
    """``$AGENTLOOP_HOME`` if set (and not empty), else platformdirs' user data dir."""
    env = os.environ.get(HOME_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("agentloop", appauthor=False))


def default_store_path() -> Path:
    """``$AGENTLOOP_HOME/sessions.db``, else ``<user data dir>/agentloop/sessions.db``."""
    return agentloop_home() / STORE_FILENAME


def ensure_private_dir(directory: Path) -> None:
    """Create ``directory`` (and missing parents) so that only the user can enter it.

    Only the store's own directory is restricted, and only when created here: an existing
    directory, or a parent such as ``~/.local/share``, keeps the mode the user chose.
    """
    if directory.is_dir():
        return
    directory.parent.mkdir(parents=True, exist_ok=True)
    try:
        directory.mkdir(mode=DIR_MODE)
    except FileExistsError:
        return
    # mkdir's mode is filtered by the umask; make sure it is exactly 0700.
    os.chmod(directory, DIR_MODE)


def workspace_key(directory: str | os.PathLike[str] | None = None) -> str:
    """A workspace's identity: the resolved absolute path of ``directory`` (default: cwd), as
    text that can be stored and sent: a byte of the path that is not UTF-8 (which Python
    carries as a lone surrogate) is written ``\\xNN``."""
    path = str(Path(directory if directory is not None else os.getcwd()).expanduser().resolve())
    return _LONE_SURROGATE.sub(_escaped, path) if _LONE_SURROGATE.search(path) else path


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"
