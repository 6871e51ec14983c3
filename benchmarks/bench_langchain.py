"""LangChain's ``SummarizationMiddleware`` beside agentloop, for the compaction benchmarks.

An optional extra (``pip install -e ".[bench]"``); every entry point returns None when it is
not installed, and the tables say "n/a". Messages are converted the way ``langchain-anthropic``
represents Claude conversations: assistant content as Anthropic blocks with ``tool_calls``
beside them, one ``ToolMessage`` per ``tool_result``, other user blocks in a ``HumanMessage``;
back to the Messages API, consecutive user-side messages are merged (as ``ChatAnthropic``
does before sending). The chat model is a zero-latency fake whose ``_llm_type`` selects the
counter LangChain uses for Anthropic models (characters / 3.3, scaled by reported usage).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bench_support  # noqa: F401  (puts the repository on sys.path)
from bench_support import SUMMARY

from agentloop import Message, Usage

NOT_INSTALLED = 'n/a (langchain is not installed: pip install -e ".[bench]")'


def available() -> bool:
    try:
        import langchain.agents.middleware.summarization  # noqa: F401
        import langchain_core.language_models.fake_chat_models  # noqa: F401
    except ImportError:
        return False
    return True


def version() -> str:
    try:
        from importlib.metadata import version as dist_version

        core = dist_version("langchain-core")
        return f"langchain {dist_version('langchain')}, langchain-core {core}"
    except Exception:
        return "langchain not installed"


def chat_model(max_input_tokens: int) -> Any:
    """A zero-latency fake chat model that LangChain treats as an Anthropic one."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    # Made with type(): the class exists only when langchain does.
    fake = type(
        "FakeAnthropicChat",
        (GenericFakeChatModel,),
        {"_llm_type": property(lambda self: "anthropic-chat-fake")},
    )
    return fake(
        messages=itertools.repeat(AIMessage(content=SUMMARY)),
        profile={"max_input_tokens": max_input_tokens},
    )


def middleware(trigger_tokens: int, window: int, keep: Any = ("messages", 20)) -> Any:
    """``SummarizationMiddleware`` triggering at ``trigger_tokens`` (its default keeps 20
    messages and summarizes at most the last 4,000 tokens of what it replaces)."""
    from langchain.agents.middleware.summarization import SummarizationMiddleware

    return SummarizationMiddleware(
        chat_model(window), trigger=("tokens", trigger_tokens), keep=keep
    )


def provider_of(mw: Any) -> str:
    """The provider name the reported-usage check compares replies against."""
    return str(mw.model._get_ls_params().get("ls_provider"))


def to_langchain(messages: Sequence[Message], provider: str) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[Any] = []
    for message in messages:
        if message.role == "assistant":
            calls = [
                {"name": b["name"], "args": b.get("input", {}), "id": b["id"], "type": "tool_call"}
                for b in message.content
                if b.get("type") == "tool_use"
            ]
            usage = message.usage
            metadata = None
            if usage is not None:
                metadata = {
                    "input_tokens": usage.prompt_tokens,
                    "output_tokens": usage.output_tokens,
                    "total_tokens": usage.context_tokens,
                }
            out.append(
                AIMessage(
                    content=[dict(b) for b in message.content],
                    tool_calls=calls,
                    usage_metadata=metadata,
                    response_metadata={"model_provider": provider},
                )
            )
            continue
        rest: list[str | dict[Any, Any]] = []
        for block in message.content:
            if block.get("type") == "tool_result":
                content = block.get("content", "")
                out.append(
                    ToolMessage(
                        content=content if isinstance(content, str | list) else str(content),
                        tool_call_id=str(block["tool_use_id"]),
                        status="error" if block.get("is_error") else "success",
                    )
                )
            else:
                rest.append(dict(block))
        if rest:
            out.append(HumanMessage(content=rest))
    return out


def from_langchain(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Messages API params, consecutive user-side messages merged as ``ChatAnthropic`` does."""
    from langchain_core.messages import AIMessage, ToolMessage

    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for message in messages:
        if isinstance(message, ToolMessage):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.content,
            }
            if message.status == "error":
                block["is_error"] = True
            add("user", [block])
        else:
            content = message.content
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            add(
                "assistant" if isinstance(message, AIMessage) else "user", [dict(b) for b in blocks]
            )
    return out


def check(mw: Any, messages: list[Any]) -> bool:
    """The per-turn trigger check, as its ``before_model`` makes it."""
    mw._ensure_message_ids(messages)
    total = mw.token_counter(messages)
    return bool(mw._should_summarize(messages, total))


def next_turn(provider: str, turn: int, context_tokens: int) -> list[Any]:
    """What one more turn appends: the reply (with its reported usage) and a new request."""
    reply = Message.assistant(
        f"Done with step {turn}.", usage=Usage(input_tokens=context_tokens, output_tokens=20)
    )
    return to_langchain([reply, Message.user(f"Now step {turn + 1}, please.")], provider)


@dataclass
class LangChainResult:
    triggered: bool
    params: list[dict[str, Any]]
    """The next request's messages, as the Messages API takes them."""
    own_tokens: int
    """What LangChain's own counter says of the result (no system prompt, no tools)."""
    kept: int
    """Messages (LangChain's) kept verbatim after the summary."""


def summarize(mw: Any, messages: list[Any]) -> LangChainResult:
    """One ``before_model`` call over ``messages`` and its result."""
    update = mw.before_model({"messages": messages}, None)
    if update is None:
        return LangChainResult(False, from_langchain(messages), mw.token_counter(messages), 0)
    new = list(update["messages"][1:])  # [RemoveMessage(all), summary, *kept]
    return LangChainResult(True, from_langchain(new), mw.token_counter(new), len(new) - 1)
