"""The model a run uses, checked before the first message: a blank name refused, a model the
Models API does not know (its 404) or marks retired refused at start-up, a model the Models API
(``lifecycle``, ``deprecated_at``, ``retires_at``) or the SDK marks deprecated said once, in one
line, with its date, and a window above the model's own refused."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Callable
from datetime import UTC, date, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from agentloop._errors import ModelError

if TYPE_CHECKING:
    from agentloop._adapters.anthropic_capabilities import ModelLifecycle
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


CURRENT = "(a current model: -m, or /model in a session)"


def deprecation(
    name: str, lifecycle: ModelLifecycle | None = None, *, today: date | None = None
) -> str | None:
    """One line when the Models API (``lifecycle``: its answer, the live word) or else the
    SDK's table marks ``name`` deprecated or retired, with its date; else None."""
    if lifecycle is not None and lifecycle.stage in ("deprecated", "retired"):
        return f"{name} {_life(lifecycle, today or datetime.now(UTC).date())} {CURRENT}"
    end = _deprecated_models().get(name)
    if end is None:
        return None
    return f"{name} is deprecated: its end of life is {end} {CURRENT}"


def _life(lifecycle: ModelLifecycle, today: date) -> str:
    since = f" since {lifecycle.deprecated_at}" if lifecycle.deprecated_at else ""
    retires = lifecycle.retires_at
    if lifecycle.stage == "retired":
        when = f" since {retires}" if retires else ""
        return f"is retired{when} (the Models API): requests to it fail"
    if retires is None:
        return f"is deprecated{since} (the Models API; no retirement date is set yet)"
    if retires < today.isoformat():
        return f"is deprecated (the Models API): its retirement, set for {retires}, is overdue"
    return f"is deprecated (the Models API): it retires on {retires}"


def retired(name: str, lifecycle: ModelLifecycle | None) -> str | None:
    """Why ``name`` cannot be used: the Models API marks it retired (requests to it fail)."""
    if lifecycle is None or lifecycle.stage != "retired":
        return None
    when = lifecycle.retires_at or lifecycle.deprecated_at
    return f"the Models API marks {name} retired{f' ({when})' if when else ''}: requests to it fail"


class DeprecationNotices:
    """Each model's deprecation said once a run: at start-up from what is known then (the SDK's
    table; the Models API's answer when it was asked), else as soon as the API has answered (its
    lookup comes with the first request on a model: after that turn, or after ``/model``).
    ``known``: what the API said of a model's lifecycle so far, never a lookup of its own."""

    def __init__(self, known: Callable[[str], ModelLifecycle | None] | None) -> None:
        self._known = known
        self._settled: set[str] = set()

    def line(self, name: str) -> str | None:
        """The line to say about ``name`` now, once; None when there is nothing (more) to say."""
        if name in self._settled:
            return None
        lifecycle = self._known(name) if self._known is not None else None
        said = deprecation(name, lifecycle)
        if said is not None or lifecycle is not None:  # said, or the API's word is in
            self._settled.add(name)
        return said


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
