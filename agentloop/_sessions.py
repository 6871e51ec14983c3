"""The ``sessions`` store as agentloop imports it: the package installed beside ``agentloop``,
never whatever module called ``sessions`` comes first on ``sys.path``.

Python puts the script's directory (or, for ``python -m``, the working directory) first on the
path, so a user's own ``sessions.py`` — common in web apps — would be what ``from sessions
import ...`` finds, and ``from agentloop import AgentLoop`` would fail. So agentloop takes the
store's names from here, and the user's module stays the user's:

* when ``import sessions`` gives our package (the usual case), this is that very module: one
  copy of its classes, shared with the user's ``from sessions import ...``;
* when the name belongs to someone else, our package is loaded once more under the private
  name ``agentloop._sessions_store`` (it imports its own modules relatively, so it works under
  any name), and ``import sessions`` goes on giving the user's module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessions import CompactionEntry as CompactionEntry
    from sessions import Conversation as Conversation
    from sessions import Lease as Lease
    from sessions import NewMessage as NewMessage
    from sessions import SearchHit as SearchHit
    from sessions import SearchQueryError as SearchQueryError
    from sessions import Session as Session
    from sessions import SessionError as SessionError
    from sessions import SessionLeasedError as SessionLeasedError
    from sessions import SessionNotFoundError as SessionNotFoundError
    from sessions import SessionStore as SessionStore
    from sessions import StoredMessage as StoredMessage
    from sessions import StoreMissingError as StoreMissingError
    from sessions import StoreVersionError as StoreVersionError
    from sessions import copy_store as copy_store
    from sessions import default_store_path as default_store_path
    from sessions import new_session_id as new_session_id
    from sessions import open_store as open_store
    from sessions import pair_safe_cut as pair_safe_cut
    from sessions import workspace_key as workspace_key
    from sessions._list_handle import open_listing as open_listing
    from sessions._sql_listing import SESSION_FIELDS as SESSION_FIELDS

HOME = Path(__file__).resolve().parent.parent / "sessions"
"""Where our ``sessions`` package is installed: beside ``agentloop``."""
PRIVATE_NAME = "agentloop._sessions_store"
"""Its module name when ``sessions`` is someone else's."""
_FROM_SUBMODULES = {"open_listing": "._list_handle", "SESSION_FIELDS": "._sql_listing"}
"""Internal names agentloop takes from the package's own modules (the CLI's fast listing)."""


def _is_ours(origin: object) -> bool:
    return isinstance(origin, str) and Path(origin).resolve() == HOME / "__init__.py"


def _imported(name: str) -> ModuleType:
    # The import statement's own machinery (not importlib.import_module): ``-X importtime``
    # reports what it loads, as it does for the rest of agentloop.
    module: ModuleType = __import__(name, fromlist=["__name__"])
    return module


def _load() -> ModuleType:
    current = sys.modules.get("sessions")
    if current is not None and _is_ours(getattr(current, "__file__", None)):
        return current
    if current is None:
        spec = importlib.util.find_spec("sessions")  # looks, imports nothing
        if spec is not None and _is_ours(spec.origin):
            return _imported("sessions")
    loaded = sys.modules.get(PRIVATE_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(
        PRIVATE_NAME, HOME / "__init__.py", submodule_search_locations=[str(HOME)]
    )
    if spec is None or spec.loader is None:  # pragma: no cover - the package is installed
        raise ImportError(f"agentloop cannot load its sessions package from {HOME}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[PRIVATE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[PRIVATE_NAME]
        raise
    return module


package = _load()
"""The store package agentloop uses (``sessions`` itself, unless that name is taken)."""


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name stays an error for them

    def __getattr__(name: str) -> Any:
        submodule = _FROM_SUBMODULES.get(name)
        if submodule is None:
            value = getattr(package, name)
        else:
            value = getattr(_imported(package.__name__ + submodule), name)
        globals()[name] = value
        return value
