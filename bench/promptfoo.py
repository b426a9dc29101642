"""Promptfoo, run on the same traces as `guardrail_ci` with its equivalent of the 7 guardrails.

Each trace is a Promptfoo test case whose variables carry the trace's answer, tool calls,
citations, agent and flow; the `echo` provider returns the answer, and seven `javascript`
assertions do what the example guardrails do (scope included: a guardrail whose scope does
not select a trace passes it). Promptfoo is installed once with npm into
~/.cache/kindgi-bench/promptfoo (a version that runs on Node 20; no browser download).

Used by bench/guardrail_ci.py; not imported by the console.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

VERSION = "0.118.13"
CACHE = Path(os.environ.get("KINDGI_BENCH_CACHE", Path.home() / ".cache" / "kindgi-bench")) / "promptfoo"
BINARY = CACHE / "node_modules" / ".bin" / "promptfoo"
#: bench/guardrail_ci.py's measure: runs a command and gives its Run (times, peak memory).
Measure = Callable[[list[str], dict[str, str] | None], Any]

# The example guardrails (examples/guardrails/*.json) as Promptfoo assertions.
_VARS = "const v = context.vars; const tools = JSON.parse(v.tools); "
ASSERTIONS = [
    # no-internal-notes-in-answers: forbidden-substring, case-insensitive.
    "const o = output.toLowerCase(); return !['internal use only', 'api_key=', 'sk-live-'].some((s) => o.includes(s));",
    # refund-issued-at-most-once: max-tool-calls of issue_refund.
    _VARS + "return tools.filter((n) => n === 'issue_refund').length <= 1;",
    # refund-answers-cite-policy: must-cite, support-bot in the refund flow.
    _VARS + "if (v.agent !== 'support-bot' || v.flow !== 'refund') return true; "
    "const cited = v.citations ? JSON.parse(v.citations) "
    ": [...output.matchAll(/\\[([^\\]]+)\\]/g)].map((m) => m[1]); "
    "const allowed = ['policy-refunds', 'policy-shipping', 'policy-warranty']; "
    "return cited.length >= 1 && cited.every((s) => allowed.includes(s));",
    # support-never-deletes-accounts: never-call-tool, support-bot.
    _VARS + "if (v.agent !== 'support-bot') return true; "
    "return !tools.some((n) => n === 'delete_account' || n === 'grant_admin');",
    # refund-answers-name-the-order: output-matches, refund flow.
    _VARS + "if (v.flow !== 'refund') return true; return /\\border\\s+#?\\d{3,}\\b/i.test(output);",
    # refund-answers-give-timeline: required-substring, refund-confirmation flow (ci-only).
    _VARS + "if (v.flow !== 'refund-confirmation') return true; "
    "return output.toLowerCase().includes('5 business days');",
    # refund-checks-eligibility-first: tool-order, refund flow.
    _VARS + "if (v.flow !== 'refund') return true; "
    "const order = ['lookup_order', 'check_refund_eligibility', 'issue_refund']; "
    "const first = order.map((t) => tools.indexOf(t)); "
    "for (let j = 0; j < 3; j++) { if (first[j] < 0) continue; "
    "for (let i = 0; i < j; i++) { if (first[i] < 0 || first[i] > first[j]) return false; } } "
    "return true;",
]


def install() -> Path:
    """Promptfoo's command, installed with npm on first use."""
    if BINARY.exists():
        return BINARY
    if shutil.which("npm") is None:
        raise SystemExit("Promptfoo needs Node.js and npm (apt-get install nodejs npm)")
    CACHE.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1", "PUPPETEER_SKIP_DOWNLOAD": "1"}
    print(f"installing promptfoo {VERSION} with npm into {CACHE} (once)...", flush=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), f"promptfoo@{VERSION}"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    return BINARY


def _test_case(trace: Mapping[str, Any]) -> dict[str, Any]:
    citations = trace.get("citations")
    variables = {
        "output": trace.get("output") or "",
        "tools": json.dumps([call["name"] for call in trace.get("toolCalls") or ()]),
        "agent": trace.get("agent") or "",
        "flow": trace.get("flow") or "",
    }
    if citations is not None:
        variables["citations"] = json.dumps([c.get("source") for c in citations])
    return {"description": trace["id"], "vars": variables}


def write_config(folder: Path, traces: Iterable[Mapping[str, Any]]) -> Path:
    """A Promptfoo configuration: the echo provider, one test per trace, the 7 assertions."""
    config = {
        "description": "guardrail_ci equivalent",
        "prompts": ["{{output}}"],
        "providers": ["echo"],
        "defaultTest": {"assert": [{"type": "javascript", "value": "\n" + code} for code in ASSERTIONS]},
        "tests": [_test_case(trace) for trace in traces],
    }
    path = folder / "promptfooconfig.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def run(config: Path, output: Path, measure: Measure, jobs: int = 4) -> Any:
    """`promptfoo eval` over the configuration, measured (bench/guardrail_ci.py's Run)."""
    binary = install()
    env = {
        **os.environ,
        "PROMPTFOO_CONFIG_DIR": str(config.parent / "promptfoo-home"),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CACHE_ENABLED": "false",
    }
    command = [str(binary), "eval", "-c", str(config), "-j", str(jobs), "-o", str(output)]
    command += ["--no-cache", "--no-progress-bar", "--no-table", "--no-write"]
    measured = measure(command, env)  # exit 100 when an assertion fails
    if not output.exists():
        raise SystemExit("promptfoo wrote no results")
    return measured
