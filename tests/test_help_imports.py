"""`agentloop --help` loads what it prints and no more: the parser, the slash-command table and
the light defaults, none of the agent, the settings' dataclasses, the read loop or the SDK (the
start-up figures: benchmarks/bench_startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentloop._cli.main import STRATEGY_CHOICES
from agentloop._core.values.settings import STRATEGIES

REPO = Path(__file__).resolve().parents[1]
NOT_FOR_HELP = (
    "dataclasses",
    "agentloop._core.values.settings",
    "agentloop._cli.repl",
    "agentloop._cli.app",
    "agentloop._agent",
    "agentloop._loop",
    "agentloop._adapters",
    "sessions",
    "pydantic",
    "anthropic",
)
SCRIPT = f"""
import contextlib, io, json, sys
from agentloop._cli.main import main
NAMES = {NOT_FOR_HELP!r}
with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        main(["--help"])
    except SystemExit as exit_:
        code = exit_.code
loaded = sorted(m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in NAMES))
print(json.dumps({{"code": code, "help": shown.getvalue(), "loaded": loaded}}))
"""


def test_help_loads_none_of_what_only_a_run_needs() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLOOP_", "ANTHROPIC_"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    usage = "--compaction-strategy {auto,summarize,sliding_window,prune,server,none}"
    assert usage in result["help"]
    assert "/compact --review" in result["help"]  # the slash commands are listed
    assert result["loaded"] == []


def test_the_strategies_help_offers_are_the_settings_strategies() -> None:
    # Written out in main so that --help need not load the settings: the same names, in order.
    assert STRATEGY_CHOICES == STRATEGIES
