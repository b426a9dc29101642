"""Benchmark of `manage.py guardrail_ci`: 20,000 traces x the 7 built-in checks.

Generates realistic support-bot traces (JSON Lines) and the example guardrails in a
temporary folder, runs the command as a subprocess several times, and prints the wall
time and peak memory against the targets (1 s, 100 MB) and against Promptfoo's
27 s / 940 MB for the same work. A benchmark prints ratios; it asserts nothing.

    python bench/guardrail_ci.py [--traces 20000] [--repeat 5] [--format text]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS, TARGET_MB = 1.0, 100.0
PROMPTFOO_SECONDS, PROMPTFOO_MB = 27.0, 940.0

TOOLS = [
    "lookup_order",
    "check_refund_eligibility",
    "issue_refund",
    "search_policies",
    "track_parcel",
    "create_ticket",
    "lookup_customer",
    "delete_account",
]
POLICIES = ["policy-refunds", "policy-shipping", "policy-warranty", "internal-wiki"]
FLOWS = ["refund", "refund", "refund-confirmation", "shipping", "account", "faq"]
ANSWERS = [
    "Yes: order {order} can be refunded within 30 days [{policy}].",
    "Done: the refund for order #{order} is on its way and takes 5 business days [{policy}].",
    "Your parcel for order {order} left the warehouse today.",
    "I have passed your request on to our team; your ticket is T-{order}.",
    "Internal use only: customer flagged for order {order}.",
    "We answer every day from 8:00 to 20:00 [{policy}] [policy-hours].",
]


def make_trace(number: int, rng: random.Random) -> dict[str, object]:
    """One realistic support-bot turn, with a few tool calls, messages and usage."""
    order = rng.randint(1000, 99999)
    policy = rng.choice(POLICIES)
    question = f"Hello, I need help with order {order}: can I get a refund? " * rng.randint(1, 3)
    answer = rng.choice(ANSWERS).format(order=order, policy=policy)
    if rng.random() < 0.05:
        answer = None
    calls = [
        {
            "id": f"call-{n}",
            "name": name,
            "arguments": {"order": str(order), "customer": f"c-{number % 977}"},
            "result": {"status": rng.choice(["delivered", "processing", "refunded"]), "ok": True},
            "startedAt": "2026-11-29T10:00:01Z",
            "endedAt": "2026-11-29T10:00:02Z",
        }
        for n, name in enumerate(
            rng.sample(TOOLS[:7], rng.randint(0, 4))
            + (["delete_account"] if rng.random() < 0.01 else [])
        )
    ]
    trace: dict[str, object] = {
        "id": f"run-{number:06d}",
        "tenant": "acme",
        "agent": "support-bot" if rng.random() < 0.9 else "faq-bot",
        "flow": rng.choice(FLOWS),
        "startedAt": "2026-11-29T10:00:00Z",
        "endedAt": "2026-11-29T10:00:04Z",
        "input": question,
        "output": answer,
        "messages": [
            {
                "role": "system",
                "content": "You are Acme's support assistant. Be brief and cite policies.",
            },
            {"role": "user", "content": question},
            {"role": "assistant", "content": answer},
        ],
        "toolCalls": calls,
        "usage": {
            "inputTokens": rng.randint(200, 4000),
            "outputTokens": rng.randint(10, 400),
            "costUsd": round(rng.random() / 100, 5),
            "model": "gpt-4.1-mini",
        },
        "metadata": {"release": "2026.11.3", "region": rng.choice(["eu-west-1", "us-east-1"])},
    }
    if rng.random() < 0.3:
        trace["citations"] = [{"source": policy, "title": "Policy"}]
    return trace


def write_inputs(folder: Path, count: int) -> tuple[list[Path], Path]:
    guardrails = sorted((ROOT / "examples" / "guardrails").glob("*.json"))
    copies = []
    for path in guardrails:
        copies.append(folder / path.name)
        shutil.copy(path, copies[-1])
    rng = random.Random(2026)
    traces = folder / "traces.jsonl"
    with traces.open("w", encoding="utf-8") as handle:
        for number in range(count):
            handle.write(json.dumps(make_trace(number, rng), separators=(",", ":")) + "\n")
    return copies, traces


def run_once(
    guardrails: list[Path], traces: Path, fmt: str, output: Path
) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB and exit status of one run of the command."""
    command = [
        sys.executable,
        "manage.py",
        "guardrail_ci",
        "--guardrails",
        *map(str, guardrails),
        "--traces",
        str(traces),
        "--format",
        fmt,
        "--output",
        str(output),
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if completed.returncode not in (0, 1):
        sys.exit(f"guardrail_ci failed ({completed.returncode}):\n{completed.stderr}")
    # ru_maxrss of the children is the largest child so far; runs only grow it.
    return seconds, max(peak_kb, before) / 1024, completed.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--format", choices=("text", "json", "junit"), default="text")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as tmp:
        folder = Path(tmp)
        guardrails, traces = write_inputs(folder, args.traces)
        size_mb = traces.stat().st_size / 1e6
        print(
            f"{args.traces} traces ({size_mb:.1f} MB JSONL) x {len(guardrails)} guardrails, "
            f"format {args.format}, {args.repeat} runs"
        )
        runs = [
            run_once(guardrails, traces, args.format, folder / "report.out")
            for _ in range(args.repeat)
        ]
        print((folder / "report.out").read_text().splitlines()[-1] if args.format == "text" else "")
    times = sorted(seconds for seconds, _, _ in runs)
    best, median = times[0], times[len(times) // 2]
    peak = max(mb for _, mb, _ in runs)
    print(f"wall time: best {best:.3f} s, median {median:.3f} s   peak RSS: {peak:.1f} MB")
    print(
        f"vs target:    time {median / TARGET_SECONDS:.2f}x of {TARGET_SECONDS:.0f} s, "
        f"memory {peak / TARGET_MB:.2f}x of {TARGET_MB:.0f} MB"
    )
    print(
        f"vs Promptfoo ({PROMPTFOO_SECONDS:.0f} s / {PROMPTFOO_MB:.0f} MB): "
        f"{PROMPTFOO_SECONDS / median:.1f}x faster, {PROMPTFOO_MB / peak:.1f}x less memory"
    )


if __name__ == "__main__":
    main()
