"""Benchmark: the CLI's start-up (issue 44.4): `--help`, every group's `-h`, a completion TAB,
`store verify` and `store stats` of a two-record store, each a fresh `mqtool` process.

    python benchmarks/cli_startup.py [--rounds 15] [--before-tree DIR] [--quick] [--json]

Baselines measured in the same run: `python -c pass` (the interpreter, with this environment's
site-packages) and `python -c "import typer"` (the CLI framework alone). Every round runs every
case once, in an order rotated round by round, so a shared machine's drift falls on all alike;
each case reports the median wall time and the median CPU time (user + system, of the child),
and both as ratios to the baselines. Targets (issue 44): `--help` and any `-h` ≤ 0.25 s,
`store verify` of a tiny store ≤ 0.4 s, on a quiet machine.

With --before-tree DIR (another checkout, e.g. `git archive` of an earlier commit with its store
kernel built), every mqtool case also runs from that tree in the same rounds ("before: ..."), and
each case reports its ratio to its before twin.

The children may write and read bytecode caches (__pycache__), as an installed mqtool does:
PYTHONDONTWRITEBYTECODE, if set here, is dropped for them (with it, every run compiles each of
mqtool's modules from source again: ~0.1 s of `store verify`). --no-pyc keeps it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

HELP_TARGET_S = 0.25
VERIFY_TARGET_S = 0.4


def mqtool() -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m mqtool`."""
    script = Path(sys.executable).parent / "mqtool"
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqtool"]


def tiny_store(root: Path) -> Path:
    from mqtool_store.messagestore import Message, MessageStore
    from mqtool_store.storeconfig import MessageStoreConfig
    with MessageStore(MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 20)) as s:
        s.put(Message("Tiny", 0, b"one", {"TAGS": "A"}))
        s.put(Message("Tiny", 0, b"two", {"TAGS": "A"}))
    return root


def cases(store: Path, quick: bool, before: dict | None = None) -> dict[str, tuple[list[str], dict]]:
    """name -> (argv, extra environment); with `before` (the environment that runs another tree), a
    "before: " twin of every mqtool case."""
    from mqtool.cli import COMMANDS, GROUPS
    cli = mqtool()
    out: dict[str, tuple[list[str], dict]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], {}),
        "import typer": ([sys.executable, "-c", "import typer"], {}),
        "mqtool --help": (cli + ["--help"], {}),
        "mqtool store verify -h": (cli + ["store", "verify", "-h"], {}),
        "mqtool store verify TINY": (cli + ["store", "verify", str(store)], {}),
        "TAB: mqtool store ver": (cli, {"_MQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "mqtool store ver",
                                        "COMP_CWORD": "2"}),
    }
    if not quick:
        out["mqtool -h"] = (cli + ["-h"], {})
        for name in [*GROUPS, *COMMANDS]:
            out[f"mqtool {name} -h"] = (cli + [name, "-h"], {})
        out["mqtool store stats TINY --json"] = (cli + ["store", "stats", str(store), "--json"], {})
        out["TAB: mqtool to"] = (cli, {"_MQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "mqtool to",
                                       "COMP_CWORD": "1"})
        out["TAB: mqtool topic cr"] = (cli, {"_MQTOOL_COMPLETE": "complete_bash", "COMP_WORDS": "mqtool topic cr",
                                             "COMP_CWORD": "2"})
    if before is not None:
        for name, (argv, env) in list(out.items())[2:]:
            out["before: " + name] = (argv, {**env, "PYTHONPATH": before["PYTHONPATH"]})
    return out


BASE_ENV = dict(os.environ)


def run_once(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one run; it must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=dict(BASE_ENV, **env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True, cwd=REPO, timeout=60)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="a few cases, 2 rounds (the test suite's smoke run)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-pyc", action="store_true", help="keep PYTHONDONTWRITEBYTECODE for the children")
    ap.add_argument("--before-tree", metavar="DIR", type=Path, help="another checkout: its mqtool measured too")
    args = ap.parse_args()
    if not args.no_pyc:
        BASE_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    rounds = 2 if args.quick else args.rounds
    tmp = Path(tempfile.mkdtemp(prefix="mqtool-bench-startup-"))
    try:
        before = None
        if args.before_tree:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from brokerproc import tree_env
            before = tree_env(args.before_tree, tmp)
        table = cases(tiny_store(tmp / "store"), args.quick, before)
        names = list(table)
        for name in names:                       # once untimed: files in the page cache, .pyc written
            run_once(*table[name])
        walls: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                wall, cpu = run_once(*table[name])
                walls[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = {n: statistics.median(v) for n, v in walls.items()}
    cpu = {n: statistics.median(v) for n, v in cpus.items()}
    base, typer_ = "python -c pass", "import typer"
    result = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version(), "load_average": [round(x, 2) for x in os.getloadavg()]},
        "data": {"store": "2 records of one topic in a 1 MiB commit log file, engine-written", "rounds": rounds,
                 "command": " ".join(mqtool()),
                 "bytecode_caches": "not written (PYTHONDONTWRITEBYTECODE)"
                 if BASE_ENV.get("PYTHONDONTWRITEBYTECODE") else "written and read"},
        "baseline": {base: {"wall_s": round(wall[base], 4), "cpu_s": round(cpu[base], 4)},
                     typer_: {"wall_s": round(wall[typer_], 4), "cpu_s": round(cpu[typer_], 4)}},
        "cases": {n: {"wall_s": round(wall[n], 4), "cpu_s": round(cpu[n], 4),
                      "wall_vs_python": round(wall[n] / wall[base], 2),
                      "wall_vs_import_typer": round(wall[n] / wall[typer_], 2),
                      "cpu_vs_import_typer": round(cpu[n] / max(cpu[typer_], 1e-9), 2),
                      "wall_runs_s": [round(t, 3) for t in walls[n]]}
                  for n in names if n not in (base, typer_)},
    }
    for n, case in result["cases"].items():
        if "before: " + n in wall:
            case["wall_vs_before"] = round(wall[n] / wall["before: " + n], 3)
            case["cpu_vs_before"] = round(cpu[n] / max(cpu["before: " + n], 1e-9), 3)
    helps = {n: wall[n] for n in names if n.endswith(("-h", "--help")) and not n.startswith("before: ")}
    slowest = max(helps, key=helps.get)
    verify = "mqtool store verify TINY"
    result["targets"] = {
        "help_slowest": {"case": slowest, "wall_s": round(helps[slowest], 4), "target_s": HELP_TARGET_S,
                         "met": helps[slowest] <= HELP_TARGET_S},
        "verify_tiny": {"wall_s": round(wall[verify], 4), "target_s": VERIFY_TARGET_S,
                        "met": wall[verify] <= VERIFY_TARGET_S},
    }
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
