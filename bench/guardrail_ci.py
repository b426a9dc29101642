"""Benchmark of `manage.py guardrail_ci`: the four figures of its targets, side by side.

1. Against Promptfoo: 20,000 traces x the 7 example guardrails, the whole command against
   `promptfoo eval` on the same traces (echo provider, the 7 equivalent assertions, -j 4;
   bench/promptfoo.py installs it with npm on first use). Target: 50x faster, a twentieth
   of its memory or less. Memory is measured alike for both, over each one's whole process
   tree: peak RSS, and peak private (anonymous) memory beside it (see _PEAK). The command
   runs 11 times (--repeat), half before Promptfoo and half after; the ratio is by the
   median run.
2. `guardrail_ci --help`: wall time against the bare interpreter's start. Target: 80 ms.
3. Engine overhead: the evaluation loop against a bare loop calling the seven check
   functions on pre-parsed traces (bench/engine_overhead.py). Target: 1.5x at most.
4. Peak memory of a run over 1,000,000 traces, JSON and JUnit reports. Target: 100 MB.

A benchmark prints figures and ratios; it asserts nothing. Times are wall times measured
in one run, so that both sides see the same machine; the load average is printed with them.
The console's modules are byte-compiled first, as pip does when it installs a package: with
PYTHONDONTWRITEBYTECODE set (as on some machines), each run would otherwise compile every
module from source, a start-up no installed command pays.

With `--installed`, the command measured is `guardrail-ci` as a CI job installs it: the bench
makes a fresh virtual environment (python -m venv, pip install packages/guardrails), prints
its size, and times that command instead of manage.py's (figures 1, 2 and 4).

    python bench/guardrail_ci.py [--traces 20000] [--repeat 11] [--memory-traces 1000000]
                                 [--jobs 2] [--no-promptfoo] [--installed]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import engine_overhead, promptfoo  # noqa: E402

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
    answer: str | None = rng.choice(ANSWERS).format(order=order, policy=policy)
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
            rng.sample(TOOLS[:7], rng.randint(0, 4)) + (["delete_account"] if rng.random() < 0.01 else [])
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
            {"role": "system", "content": "You are Acme's support assistant. Be brief and cite policies."},
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


def write_inputs(folder: Path, count: int) -> tuple[list[Path], Path, list[dict[str, object]]]:
    """The example guardrails and `count` traces (JSON Lines) in `folder`."""
    copies = []
    for path in sorted((ROOT / "examples" / "guardrails").glob("*.json")):
        copies.append(folder / path.name)
        shutil.copy(path, copies[-1])
    rng = random.Random(2026)
    traces = [make_trace(number, rng) for number in range(count)]
    path = folder / "traces.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for trace in traces:
            handle.write(json.dumps(trace, separators=(",", ":")) + "\n")
    return copies, path, traces


def write_many(source: Path, target: Path, count: int) -> None:
    """`count` traces made from the lines of `source`, each with an id of its own."""
    lines = source.read_text(encoding="utf-8").splitlines()
    with target.open("w", encoding="utf-8") as handle:
        for number in range(count):
            line = lines[number % len(lines)]
            handle.write(f'{{"id":"run-{number:07d}"' + line[line.index(",") :] + "\n")


# Runs a command and measures its memory the same way for both sides, whatever processes
# it starts (Promptfoo's node runs as one process; guardrail_ci --jobs N forks N workers):
# - peak RSS: the largest of the kernel's peak for any one process of the tree (wait4's
#   ru_maxrss, exact) and the sum over the whole tree, sampled every 5 ms from /proc;
# - peak private memory: the tree's anonymous pages (RSS less file-backed and shared pages:
#   what the run adds to the machine beyond the program files it maps), sampled likewise.
# Linux keeps a process's peak across exec, so a command started straight from this (large)
# process would count this one's size: this small interpreter (python -S) starts it instead.
_PEAK = r"""
import os, sys, time
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

def tree(root):
    todo, pids = [str(root)], []
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    todo += handle.read().split()
        except OSError:
            pass
    return pids

def sample(root):
    rss = private = 0
    for pid in tree(root):
        try:
            with open(f"/proc/{pid}/statm") as handle:
                fields = handle.read().split()
        except OSError:
            continue
        rss += int(fields[1])
        private += int(fields[1]) - int(fields[2])
    return rss * PAGE_KB, private * PAGE_KB

pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
tree_kb = private_kb = 0
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    rss, private = sample(pid)
    tree_kb, private_kb = max(tree_kb, rss), max(private_kb, private)
    time.sleep(0.005)
peak = max(usage.ru_maxrss, tree_kb)
cpu = usage.ru_utime + usage.ru_stime
sys.stderr.write(f"\npeak-kb {peak} private-kb {private_kb} cpu-s {cpu}\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


class Run(NamedTuple):
    """One run of a command: wall and CPU seconds (user and system, its children's too),
    peak RSS and peak private memory in MB (of the process tree, see _PEAK), exit status."""

    seconds: float
    cpu_seconds: float
    peak_mb: float
    private_mb: float
    status: int


def measure(command: list[str], env: dict[str, str] | None = None) -> Run:
    """Run a command and measure it; an exit status other than 0, 1, or Promptfoo's 100 for
    failed assertions stops the bench."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-S", "-c", _PEAK, *command], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1, 100):
        sys.exit(f"{' '.join(command[:4])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    figures = done.stderr.rsplit("peak-kb ", 1)[1].split()
    peak_kb, private_kb, cpu = int(figures[0]), int(figures[2]), float(figures[4])
    return Run(seconds, cpu, peak_kb / 1024, private_kb / 1024, done.returncode)


#: The command measured: manage.py's, or the installed guardrail-ci (--installed).
MANAGE_PY = [sys.executable, "manage.py", "guardrail_ci"]
COMMAND = list(MANAGE_PY)


def install_distribution(folder: Path) -> None:
    """kindgi-guardrails in a fresh virtual environment; COMMAND becomes its guardrail-ci."""
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    package = str(ROOT / "packages" / "guardrails")
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", package], check=True)
    files = [path for path in venv.rglob("*") if path.is_file() and not path.is_symlink()]
    size = sum(path.stat().st_size for path in files) / 1e6
    print(f"installed: kindgi-guardrails in a fresh virtual environment, {size:.1f} MB ({len(files)} files with pip)")
    COMMAND[:] = [str(venv / "bin" / "guardrail-ci")]


def ci_command(guardrails: list[Path], traces: Path, fmt: str, output: Path, jobs: int = 1) -> list[str]:
    command = [*COMMAND, "--guardrails", *map(str, guardrails)]
    command += ["--traces", str(traces), "--format", fmt, "--output", str(output)]
    return command + (["--jobs", str(jobs)] if jobs > 1 else [])


def against_promptfoo(
    args: argparse.Namespace, folder: Path, guardrails: list[Path], traces: Path, docs: list[dict[str, object]]
) -> None:
    # The command's runs come half before Promptfoo's and half after it: a run lasts under a
    # second, Promptfoo's half a minute, and a shared machine's speed drifts within minutes.
    console_runs: list[Run] = []  # --installed: manage.py's command too, each run beside one installed

    def ours(count: int) -> list[Run]:
        runs = []
        for _ in range(count):
            runs.append(measure(ci_command(guardrails, traces, "json", folder / "report.json")))
            if args.installed:
                arguments = ci_command(guardrails, traces, "json", folder / "c.json")[len(COMMAND) :]
                console_runs.append(measure([*MANAGE_PY, *arguments]))
        return runs

    runs = ours((args.repeat + 1) // 2)
    pf = None
    if not args.no_promptfoo:
        config = promptfoo.write_config(folder, docs)
        pf = promptfoo.run(config, folder / "promptfoo.json", measure, jobs=4)
    runs += ours(args.repeat // 2)
    seconds = statistics.median(run.seconds for run in runs)
    best = min(run.seconds for run in runs)
    cpu = statistics.median(run.cpu_seconds for run in runs)
    peak, private = max(run.peak_mb for run in runs), max(run.private_mb for run in runs)
    print(
        f"1. {_name()}, {args.traces} traces x 7, JSON report: {seconds:.3f} s ({cpu:.2f} s CPU), "
        f"peak RSS {peak:.1f} MB, private {private:.1f} MB (median time, largest memory of {args.repeat} runs, "
        f"half before Promptfoo and half after; the fastest {best:.3f} s, the slowest "
        f"{max(run.seconds for run in runs):.3f} s)"
    )
    if console_runs:
        theirs = statistics.median(run.seconds for run in console_runs)
        print(
            f"   manage.py guardrail_ci, each run beside an installed one: {theirs:.3f} s, peak RSS "
            f"{max(run.peak_mb for run in console_runs):.1f} MB => installed / manage.py {seconds / theirs:.2f}x"
        )
    if args.jobs > 1:
        jobs = [
            measure(ci_command(guardrails, traces, "json", folder / "report-jobs.json", args.jobs))
            for _ in range(args.repeat)
        ]
        print(
            f"   with --jobs {args.jobs}: {statistics.median(run.seconds for run in jobs):.3f} s, "
            f"peak RSS {max(run.peak_mb for run in jobs):.1f} MB (the {args.jobs + 1} processes together)"
        )
    if pf is None:
        print("   Promptfoo: not run (--no-promptfoo)")
        return
    print(
        f"   Promptfoo {promptfoo.VERSION} (-j 4, echo): {pf.seconds:.2f} s ({pf.cpu_seconds:.1f} s CPU), "
        f"peak RSS {pf.peak_mb:.0f} MB, private {pf.private_mb:.0f} MB"
    )
    print(
        f"   => {pf.seconds / seconds:.1f}x faster (target 50x; {pf.seconds / best:.1f}x by the fastest run; "
        f"{pf.cpu_seconds / cpu:.0f}x less CPU); "
        f"{pf.peak_mb / peak:.1f}x less peak RSS (target 20x), {pf.private_mb / private:.1f}x less private memory"
    )


def _name() -> str:
    return "guardrail_ci" if len(COMMAND) > 1 else "guardrail-ci (installed)"


def help_time(repeat: int = 15) -> None:
    def wall(command: list[str]) -> list[float]:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - started) * 1000)
        return times

    bare = wall([sys.executable, "-c", "pass"])
    help_ = wall([*COMMAND, "--help"])
    print(
        f"2. {_name()} --help: best {min(help_):.0f} ms, median {statistics.median(help_):.0f} ms "
        f"(target 80 ms); the interpreter alone: best {min(bare):.0f} ms, median {statistics.median(bare):.0f} ms"
    )


def overhead(guardrails: list[Path], traces: Path) -> None:
    bare, engine, scoped = engine_overhead.measure(guardrails, traces)
    print(
        f"3. engine overhead: {engine / bare:.2f}x a bare loop over the seven check functions "
        f"(target 1.5x; CPU, best of 9: bare {bare * 1000:.0f} ms, engine {engine * 1000:.0f} ms); "
        f"with the guardrails' scopes: {scoped / bare:.2f}x"
    )


def memory(args: argparse.Namespace, folder: Path, guardrails: list[Path], traces: Path) -> None:
    if not args.memory_traces:
        print("4. peak memory: not run (--memory-traces 0)")
        return
    many = folder / "many.jsonl"
    write_many(traces, many, args.memory_traces)
    size = many.stat().st_size / 1e6
    for fmt in ("json", "junit"):
        output = folder / f"many-report.{fmt}"
        run = measure(ci_command(guardrails, many, fmt, output))
        print(
            f"4. {args.memory_traces} traces ({size:.0f} MB), {fmt} report ({output.stat().st_size / 1e6:.0f} MB): "
            f"peak RSS {run.peak_mb:.1f} MB (target 100 MB), private {run.private_mb:.1f} MB, {run.seconds:.1f} s"
        )
        output.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--memory-traces", type=int, default=1_000_000)
    parser.add_argument("--jobs", type=int, default=2, help="also time guardrail_ci --jobs N (1: not)")
    parser.add_argument("--no-promptfoo", action="store_true", help="skip Promptfoo (no Node.js here)")
    parser.add_argument("--installed", action="store_true", help="measure guardrail-ci installed in a fresh venv")
    args = parser.parse_args()
    compileall.compile_dir(ROOT / "guardrails", quiet=1)
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    # The interpreter matters as much as the code: a CPython built without profile-guided and
    # link-time optimisation (pyenv's default) runs the command 10 to 17% slower.
    print(f"interpreter: CPython {sys.version.split()[0]}, {os.path.realpath(sys.executable)}")
    with tempfile.TemporaryDirectory(prefix="kindgi-bench-") as tmp:
        folder = Path(tmp)
        if args.installed:
            install_distribution(folder)
        guardrails, traces, docs = write_inputs(folder, args.traces)
        print(f"{args.traces} traces ({traces.stat().st_size / 1e6:.1f} MB JSONL) x {len(guardrails)} guardrails")
        against_promptfoo(args, folder, guardrails, traces, docs)
        help_time()
        overhead(guardrails, traces)
        memory(args, folder, guardrails, traces)
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
