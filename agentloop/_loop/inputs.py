"""A hand-written loop's history as the compacter takes it: SDK responses, dicts and merges.

Loops written from the SDK's documentation keep their history as plain dicts and append the
assistant's answer in one of three ways: our :class:`Message` (``message_from_response``), the
SDK's ``Message`` object itself (usage and all), or ``{"role": "assistant", "content":
response.content}`` (no usage: nothing anchors the measurement to the API's count). The first
two are measured from the API's figures; the third is warned about once, when such replies
keep arriving. Consecutive messages of one role, which the API combines, are merged here so
that everything agentloop sends alternates.

Per call the work follows what was appended since the previous call (the same list grown), as
the core's own conversion does.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentloop._core.values.messages import Message, merge_consecutive

NO_USAGE_WARNING_AFTER = 3
"""Assistant dicts without usage appended in a row before the warning is given."""


class Inputs:
    """Turns one conversation's incoming history into alternating :class:`Message` s."""

    def __init__(self) -> None:
        self._scanned: tuple[object, int, object] | None = None
        self._responses: dict[int, tuple[object, Message]] = {}
        self._merges: dict[tuple[int, ...], tuple[tuple[Message, ...], Message]] = {}
        self._merged_seen: tuple[object, int, object] | None = None
        self._out: list[Message] | None = None
        """The merged list last returned, when it is not the input itself (a pair merged)."""
        self._run_start = 0
        """Where, in the input, the run of the merged list's last message starts."""
        self._tail_key: tuple[int, ...] | None = None
        """The cache key of that run's merge (None: a message alone)."""
        self._without_usage = 0
        self._warned = False
        self._given: tuple[Sequence[Message], int, object] | None = None
        """What :meth:`messages` returned last, its length and last item."""

    def messages(
        self,
        items: Sequence[Any],
        convert: Callable[[Sequence[Any]], Sequence[Message]],
    ) -> Sequence[Message]:
        """``items`` (Messages, dicts, SDK responses) as alternating Messages; ``convert`` is
        the core's conversion of Messages and dicts."""
        given = self._given
        if given is not None and items is given[0] and _unchanged(given, items):
            # What this returned, handed back by the compacter's own steps: taken as it is, so
            # that the caller's list stays the one followed from call to call.
            return given[0]
        grown = self._grown_by_messages(items)
        if grown is not None:
            return grown
        out = self._merged(convert(self._accepted(items)))
        self._given = (out, len(out), out[-1] if out else None)
        return out

    def _grown_by_messages(self, items: Sequence[Any]) -> Sequence[Message] | None:
        """The per-turn path: ``items``, the list merged last time, grown by Messages only
        (nothing to convert), merged where it grew; None for any other case."""
        seen = self._merged_seen
        if seen is None or seen[0] is not items or self._responses:
            return None
        start = _grown_from(seen, items)
        if not start:
            return None
        for index in range(start, len(items)):
            if type(items[index]) is not Message:
                return None
        self._scanned = (items, len(items), items[-1])
        out = self._merged(items)
        self._given = (out, len(out), out[-1])
        return out

    # -- SDK responses and the usage warning -----------------------------------------------------

    def _accepted(self, items: Sequence[Any]) -> Sequence[Any]:
        start = _grown_from(self._scanned, items)
        foreign = False
        for item in items[start:]:
            if type(item) is Message:
                continue
            if isinstance(item, Mapping):
                if start and item.get("role") == "assistant":
                    self._note_usage(item.get("usage") is not None)
                continue
            foreign = True
            if start:
                self._note_usage(True)
        if items:
            self._scanned = (items, len(items), items[-1])
        if not foreign and not self._responses:
            return items
        out: list[Any] = []
        responses: dict[int, tuple[object, Message]] = {}
        for item in items:
            if type(item) is Message or isinstance(item, Mapping):
                out.append(item)
                continue
            cached = self._responses.get(id(item))
            if cached is None or cached[0] is not item:
                cached = (item, _from_response(item))
            responses[id(item)] = cached
            out.append(cached[1])
        self._responses = responses
        return out

    def _note_usage(self, reported: bool) -> None:
        if reported:
            self._without_usage = 0
            return
        self._without_usage += 1
        if self._without_usage >= NO_USAGE_WARNING_AFTER and not self._warned:
            self._warned = True
            warnings.warn(
                "assistant messages arrive without usage, so the context is measured by the "
                "local estimate alone: append the SDK's response itself to your history "
                "(and send messages=to_params(history))",
                UserWarning,
                stacklevel=6,  # the caller of compact_and_transition (or plan)
            )

    # -- consecutive same-role messages ---------------------------------------------------------

    def _merged(self, messages: Sequence[Message]) -> Sequence[Message]:
        start = _grown_from(self._merged_seen, messages)
        if messages:
            self._merged_seen = (messages, len(messages), messages[-1])
        out = self._out if start else None
        if start and out is not None:
            if start < len(messages) and _joins(messages[start - 1], messages[start]):
                # The newest run goes on: merged again into a new list, so that a list
                # returned before never changes under its holder (it only grows, as theirs).
                if self._tail_key is not None:
                    self._merges.pop(self._tail_key, None)
                return self._merge_from(messages, out[:-1], self._run_start, self._merges)
            return self._merge_from(messages, out, start, self._merges)
        # Alternating so far (what was returned is ``messages`` itself): only the new part is
        # looked at. A new list (or the first call) is looked at whole.
        first = _first_join(messages, max(start, 1))
        if first is None:
            if not start:
                self._out, self._merges = None, {}
            return messages
        # From the first pair on, the merged list is a list of its own, grown from then on.
        old = self._merges if not start else {}
        self._merges = {}
        return self._merge_from(messages, list(messages[: first - 1]), first - 1, old)

    def _merge_from(
        self,
        messages: Sequence[Message],
        out: list[Message],
        index: int,
        known: dict[tuple[int, ...], tuple[tuple[Message, ...], Message]],
    ) -> list[Message]:
        """``out`` (the merged ``messages[:index]``) grown by the rest of ``messages``: each run
        of messages the API combines merged once (``known``: merges made before, by the
        messages' identities)."""
        while index < len(messages):
            end = index + 1
            while end < len(messages) and _joins(messages[end - 1], messages[end]):
                end += 1
            self._run_start, self._tail_key = index, None
            if end - index == 1:
                out.append(messages[index])
            else:
                run = tuple(messages[index:end])
                key = tuple(id(m) for m in run)
                cached = known.get(key)
                if cached is None or any(a is not b for a, b in zip(cached[0], run, strict=True)):
                    cached = (run, merge_consecutive(run)[0])
                self._merges[key] = cached
                self._tail_key = key
                out.append(cached[1])
            index = end
        self._out = out
        return out


def _first_join(messages: Sequence[Message], start: int) -> int | None:
    """The index of the first message from ``start`` on that the API joins to the one before."""
    for index in range(start, len(messages)):
        if _joins(messages[index - 1], messages[index]):
            return index
    return None


def _joins(previous: Message, message: Message) -> bool:
    """Whether the API combines ``message`` with ``previous`` into one turn (the API's summary
    and system messages stand alone)."""
    if message.role != previous.role or message.role == "system":
        return False
    return not previous.is_compaction_only


def _unchanged(seen: tuple[Sequence[Any], int, object], items: Sequence[Any]) -> bool:
    return len(items) == seen[1] and (not items or items[-1] is seen[2])


def _grown_from(seen: tuple[object, int, object] | None, items: Sequence[Any]) -> int:
    """Where the new part of ``items`` starts: after what was seen, if ``items`` is the same
    list grown since; else 0 (a new list, looked at whole)."""
    if seen is None:
        return 0
    seen_list, seen_len, seen_last = seen
    if items is seen_list and 0 < seen_len <= len(items) and items[seen_len - 1] is seen_last:
        return seen_len
    return 0


def _from_response(item: object) -> Message:
    """An SDK response (or anything with ``role`` and ``content``) as a Message, usage too."""
    if type(item).__module__.split(".")[0] == "anthropic":
        from anthropic.types import Message as SDKMessage

        from agentloop._adapters.anthropic import message_from_response

        if isinstance(item, SDKMessage):
            return message_from_response(item)  # exactly the fields the API takes back
    return Message.from_param(item)
