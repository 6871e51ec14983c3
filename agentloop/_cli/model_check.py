"""The model a run uses, checked before the first message: a blank name refused, a model the
Models API does not know (its 404) refused at start-up, a model the SDK marks deprecated said
once, in one line, with its date, and a window above the model's own refused."""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop._errors import ModelError

if TYPE_CHECKING:
    from agentloop._adapters.windows import Fetch, ModelLimits

NOT_FOUND = 404


def unknown_model(fetch: Fetch, name: str) -> str | None:
    """Why the Models API does not know ``name`` (it answered 404); None when it knows it or
    could not say (no network, Bedrock: the first request then tells)."""
    try:
        fetch(name)
    except ModelError as error:
        if error.status_code == NOT_FOUND:
            return f"the Models API does not know the model {name!r} (404)"
    except Exception:  # any other failure: not an answer about the name
        return None
    return None


@cache
def _deprecated_models() -> dict[str, str]:
    """The SDK's table of deprecated models and their end-of-life dates, read from its file
    without importing the SDK (the interactive start does not wait for it); empty when absent."""
    spec = importlib.util.find_spec("anthropic")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "_data" / "deprecated_models.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.AnnAssign | ast.Assign) else None
        if isinstance(value, ast.Dict):
            try:
                table = ast.literal_eval(value)
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in table.items()}
    return {}


def deprecation(name: str) -> str | None:
    """One line when the SDK marks ``name`` deprecated: its end-of-life date; else None."""
    date = _deprecated_models().get(name)
    if date is None:
        return None
    return (
        f"{name} is deprecated: its end of life is {date} (a current model: -m, or /model "
        "in a session)"
    )


def window_above_model(window: int, own: ModelLimits, name: str, *, given: bool) -> str | None:
    """Why ``window`` cannot be used with ``name`` (whose own limits are ``own``): it is above
    the model's window, as the Models API or the table knows it; None when it fits or the
    model's window is only the default guess."""
    if own.source == "default" or window <= own.context_window:
        return None
    what = "--context-window" if given else "the window kept with this session"
    return (
        f"{what} of {window:,} tokens is above {name}'s own {own.context_window:,}-token "
        f"window ({own.source.replace('_', ' ')}): the API would refuse what does not fit"
    )
