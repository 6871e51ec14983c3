"""The live probes of ``benchmarks/bench_probes.py`` are not a stub: their
extraction and scoring run here against the test server, with a model double that answers from
exactly what its context holds (so a probe scores what the compacted context kept)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

from fake_api import TEST_API_KEY, FakeAnthropicServer, ReplySpec, text_reply
from support.loop_scripts import is_summary_request
from transcripts.recorded import calculator_session

from agentloop import AnthropicModel, as_messages

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_probes

MODEL = "claude-haiku-4-5"  # the test server does not compact it on demand: our summarizer


def _text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        for block in [content] if isinstance(content, str) else content:
            if isinstance(block, str):
                parts.append(block)
            elif block.get("type") == "text":
                parts.append(block["text"])
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                parts.append(inner if isinstance(inner, str) else str(inner))
    return "\n".join(parts)


def _echo(body: dict[str, Any]) -> ReplySpec:
    """Summaries say little; a probe is answered with everything the context holds."""
    if is_summary_request(body):
        return text_reply("## Goal\nwork on the calculator")
    return text_reply(_text(body))


def test_probes_score_what_the_compacted_context_holds(fake_api: FakeAnthropicServer) -> None:
    fake_api.handler = _echo
    transcript = calculator_session(1, 120)
    model = AnthropicModel(api_key=TEST_API_KEY, base_url=fake_api.base_url, max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = bench_probes.run_once(model, MODEL, transcript)
    for kind in bench_probes.PROBE_KINDS:
        assert run.scores[kind], kind
    # The ledger carries the files, the todos, the errors and the user's words verbatim.
    assert run.scores["artifact"] == [1.0]
    assert all(s == 1.0 for s in run.scores["continuation"])
    assert all(s == 1.0 for s in run.scores["recall"])
    assert all(s == 1.0 for s in run.scores["decision"])
    table = bench_probes.table([run, run, run])
    assert "| artifact | 1 | 1.00 | 1.00–1.00 |" in table


def test_a_wrong_answer_scores_zero_and_a_partial_one_its_share() -> None:
    history = as_messages(calculator_session(1, 80).messages)
    probes = bench_probes.probes(history, len(history) - 10)
    artifact = next(p for p in probes if p.kind == "artifact")
    assert "calc.py" in artifact.keys and len(artifact.keys) >= 2
    assert bench_probes.score(artifact, "I do not remember.") == 0.0
    half = " ".join(artifact.keys[: len(artifact.keys) // 2])
    assert bench_probes.score(artifact, half.upper()) == (len(artifact.keys) // 2) / len(
        artifact.keys
    )
    recall = [p for p in probes if p.kind == "recall"]
    assert any("AttributeError" in key for p in recall for key in p.keys)


def test_the_live_script_refuses_to_run_without_a_key(monkeypatch: Any) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert bench_probes.main([]) == 2
