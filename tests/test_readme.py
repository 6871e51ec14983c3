"""The README's library snippet runs as written, offline, and does what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_library_snippet_runs_and_compacts(tmp_path: Path) -> None:
    readme = ROOT.joinpath("README.md").read_text()
    snippets = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert snippets, "the README shows the library"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    outputs: list[str] = []
    for snippet in snippets:
        done = subprocess.run(
            [sys.executable, "-c", snippet],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    # The first snippet prints what the compaction did.
    # No model and no counting: every figure is an estimate, and the snippet says so.
    printed = r"24 → \d+ messages, [\d,]+ → [\d,]+ tokens \(measured from estimate → estimate\)\n"
    assert re.fullmatch(printed, outputs[0]), outputs[0]
    # The prompt-cache snippet marks the system prompt and the newest message.
    (marked,) = [out for out in outputs if out.startswith("breakpoint:")]
    assert marked == "breakpoint: system 0\nbreakpoint: messages 2\n"
