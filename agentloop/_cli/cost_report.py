"""What a session cost, as ``/cost``, ``sessions show`` and the JSON result show it: the token
figures as the API reported them, the cache-read share and the price (``~`` where the model's
price is not known and its family's was assumed). ``AGENTLOOP_PRICES`` overrides the table."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agentloop._core.measuring.figures import plural

if TYPE_CHECKING:
    from agentloop._adapters.session_costs import CostReport
    from agentloop._core.measuring.pricing import Price

PRICES_VARIABLE = "AGENTLOOP_PRICES"


def configured_prices() -> dict[str, Price] | None:
    """Price overrides from ``AGENTLOOP_PRICES`` (JSON), None when unset."""
    text = os.environ.get(PRICES_VARIABLE, "").strip()
    if not text:
        return None
    from agentloop._core.measuring.pricing import parse_prices

    return parse_prices(text)


def cost_lines(report: CostReport, title: str, what: str = "") -> list[str]:
    """Three lines: what (``what`` joins the request counts in one parenthesis), the tokens,
    the cache share and the price."""
    total = report.total
    usage = total.usage
    requests = (f"{what}; " if what else "") + plural(report.requests, "request")
    if report.summary_requests:
        requests += f", {plural(report.summary_requests, 'summary request')}"
    mark = "~" if total.estimated or usage.estimated else ""
    price = f"{mark}${total.dollars:,.4f}"
    if report.summaries.dollars:
        price += f" (summaries {mark}${report.summaries.dollars:,.4f})"
    guess = "~" if usage.estimated else ""  # the model only guessed its usage: no API count
    return [
        f"{title} ({requests}):",
        *_summary_kinds(report),
        f"  input {guess}{usage.input_tokens:,} · cache write "
        f"{guess}{usage.cache_creation_input_tokens:,} · cache read "
        f"{guess}{usage.cache_read_input_tokens:,} · output {guess}{usage.output_tokens:,} tokens",
        f"  cache reads {total.cache_read_share:.0%} of input · input billed at "
        f"{total.billed_input_ratio:.2f}× its uncached price · {price}",
    ]


def _summary_kinds(report: CostReport) -> list[str]:
    """What the summary requests were for, when not all wrote a compaction on this path."""
    applied = report.summary_requests - report.discarded_requests - report.off_path_requests
    if applied == report.summary_requests:
        return []
    kinds = [f"{applied} for compactions applied"] if applied else []
    if report.discarded_requests:
        kinds.append(
            f"{report.discarded_requests} discarded (a review redone or aborted, a summary "
            "prepared ahead gone stale)"
        )
    if report.off_path_requests:
        kinds.append(f"{report.off_path_requests} on other branches (a compaction undone, a fork)")
    return [f"  summary requests: {'; '.join(kinds)}"]


def cost_text(session: CostReport, conversation: CostReport, session_id: str) -> str:
    """The ``/cost`` report: this session, then the conversation across its compactions."""
    lines = cost_lines(session, f"This session {session_id[:8]}")
    if conversation.sessions > 1:
        across = f"{conversation.sessions} sessions across compactions"
        if conversation.off_path_sessions:
            across += f", {conversation.off_path_sessions} of them on other branches"
        lines += cost_lines(conversation, "The whole conversation", across)
    if conversation.total.estimated:
        lines.append(
            "  ~ the model's price is not in the table: its family's was assumed "
            f"(set {PRICES_VARIABLE} to override)"
        )
    if conversation.total.usage.estimated:
        lines.append("  ~ the model estimated its usage locally: no API counted these tokens")
    return "\n".join(lines)
