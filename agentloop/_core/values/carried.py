"""What a compaction carries besides its summary, as structure (the API's own compaction).

The API's summary is a signed block that agentloop cannot extend, so what agentloop carries over
(the artifact ledger, what the hooks rendered, pinned messages, the caller's instructions, the
latest request) travels in a message of its own after the newest user turn. :class:`Carried`
is that message's meaning: the compaction builds it, ``compaction.api_compaction`` renders it
once into the message's text, and the message keeps it (``Message.carried``; the store keeps it
in the message's metadata), so the next compaction reads the parts, never the text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from agentloop._core.values.ledger_values import Ledger, ledger_from_dict, ledger_to_dict

CARRIED_OPEN = (
    "Context carried over from before the compaction (agentloop; not a new request from the "
    "user). The complete original history is kept in the parent session; when a search_history "
    "tool is offered, use it to look up any earlier detail the summary leaves out instead of "
    "guessing."
)
"""How the text of a carried message opens."""
PinRole = Literal["user", "assistant", "system"]
PINNED_MARK = "[pinned {role} message]"
"""How a pinned message opens where it is restated (the compaction prefix, a carried message)."""


@dataclass(frozen=True, slots=True)
class Pin:
    """A pinned message restated: its role (``system``: the caller's instructions, which the
    API's summary does not keep applying) and its text."""

    role: PinRole
    text: str

    @property
    def mark(self) -> str:
        return PINNED_MARK.format(role=self.role)


@dataclass(frozen=True, slots=True)
class Carried:
    """What a compaction by the API's summary carries over, in parts."""

    state: str = ""
    """What the preserved-state hooks rendered (the ledger apart)."""
    ledger: Ledger | None = None
    """The artifact ledger, within its budget (None: no tool call made one)."""
    pinned: tuple[Pin, ...] = ()
    """Pinned messages and the caller's instructions, oldest first."""
    request: str = ""
    """The user's latest request, when the summary covers it ('' when it is kept or pinned)."""

    def __bool__(self) -> bool:
        ledger = self.ledger is not None and not self.ledger.empty
        return bool(self.state.strip() or ledger or self.pinned or self.request.strip())

    @property
    def instructions(self) -> tuple[str, ...]:
        """The caller's instructions it restates (its pinned system messages)."""
        return tuple(pin.text for pin in self.pinned if pin.role == "system")

    def to_dict(self) -> dict[str, Any]:
        """The parts as JSON-ready data (what the store keeps beside the rendered text)."""
        return {
            "state": self.state,
            "ledger": None if self.ledger is None else ledger_to_dict(self.ledger),
            "pinned": [[pin.role, pin.text] for pin in self.pinned],
            "request": self.request,
        }

    @classmethod
    def from_dict(cls, data: object) -> Carried | None:
        """The parts :meth:`to_dict` wrote; None when ``data`` is not that."""
        if not isinstance(data, Mapping):
            return None
        try:
            ledger = data.get("ledger")
            pins = []
            for role, text in cast(list[Any], data["pinned"]):
                if role not in ("user", "assistant", "system"):
                    return None
                pins.append(Pin(role, str(text)))
            return cls(
                state=str(data["state"]),
                ledger=None if ledger is None else ledger_from_dict(ledger),
                pinned=tuple(pins),
                request=str(data["request"]),
            )
        except (KeyError, TypeError, ValueError):
            return None
