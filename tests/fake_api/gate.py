"""The order in which the fake API checks a request, and what it hands on when it passes.

0. A compaction block inside a system message (``compaction_block_misplaced``).
1. An on-demand ``compaction`` request's own refusals (:func:`fake_api.ondemand.request_error`:
   their codes come before the generic rules, e.g. ``compaction_nothing_to_summarize``).
2. The conversation rules (:func:`fake_api.rules.check_request`), the ``anthropic-version``'s
   (:mod:`fake_api.api_version`), threshold compaction, cache markers.
3. What the model refuses (:mod:`fake_api.model_rules`), ``max_tokens`` over the model's
   output limit, misplaced system messages and their features without their betas
   (:mod:`fake_api.system_messages`).
4. Unresolved tool references, then on-demand compaction blocks sent back
   (:func:`fake_api.ondemand.block_error`).
5. Thinking sent back (:func:`fake_api.binding.check_thinking`): the effective request is the
   body without the blocks it dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fake_api import ondemand
from fake_api.api_version import version_problems
from fake_api.binding import Binding, check_thinking, effective_body
from fake_api.cache import cache_problems
from fake_api.compaction import compaction_problems
from fake_api.model_rules import model_problems
from fake_api.replies import ErrorReply, invalid_request
from fake_api.rules import check_request
from fake_api.system_messages import system_message_problems, tool_reference_error

if TYPE_CHECKING:
    from fake_api.server import FakeAnthropicServer


@dataclass
class Admitted:
    """A request that passed: what the model reads, and what the thinking checks found."""

    effective: dict[str, Any]
    binding: Binding = field(default_factory=Binding)
    betas: frozenset[str] = frozenset()


@dataclass
class Refused:
    """A refused request: the answer, and every problem found (recorded)."""

    error: ErrorReply
    problems: list[str]


def output_limit_problems(
    fake: FakeAnthropicServer, body: Any, *, count_tokens: bool = False
) -> list[str]:
    """``max_tokens`` over the model's output limit (what the Models API says of it)."""
    spec = fake.models.get(str(body.get("model"))) if isinstance(body, dict) else None
    wanted = body.get("max_tokens") if isinstance(body, dict) else None
    if count_tokens or spec is None or spec.max_tokens is None or not isinstance(wanted, int):
        return []
    if wanted <= spec.max_tokens:
        return []
    return [
        f"max_tokens: {wanted} > {spec.max_tokens}, which is the maximum allowed number of "
        f"output tokens for {spec.id}"
    ]


def betas(header: str | None) -> frozenset[str]:
    return frozenset(part.strip() for part in (header or "").split(",") if part.strip())


def admit(
    fake: FakeAnthropicServer,
    body: Any,
    beta_header: str | None,
    *,
    count_tokens: bool = False,
    version: str | None = None,
) -> Admitted | Refused:
    sent = betas(beta_header)
    error = ondemand.system_block_error(body)
    if error is None and isinstance(body, dict) and "compaction" in body and not count_tokens:
        error = ondemand.request_error(fake, body, set(sent))
    if error is not None:
        return Refused(error, [error.message])
    problems = check_request(body, count_tokens=count_tokens)
    problems += version_problems(body, version)
    problems += compaction_problems(body, beta_header)
    problems += cache_problems(body)
    if not problems:
        problems = model_problems(body, set(sent), count_tokens=count_tokens)
        problems += output_limit_problems(fake, body, count_tokens=count_tokens)
        problems += system_message_problems(body, sent)
    if problems:
        return Refused(invalid_request(problems[0]), problems)
    error = tool_reference_error(body) or ondemand.block_error(fake, body, set(sent))
    if error is None:
        binding = check_thinking(fake, body, set(sent))
        if binding.error is None:
            return Admitted(effective_body(body, binding.dropped), binding, sent)
        error = binding.error
    return Refused(error, [error.message])
