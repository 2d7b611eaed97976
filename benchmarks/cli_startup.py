"""CPU seconds of short ``xe2tune`` commands: an old tree and this one side by side.

Every test of the CLI and every campaign reader starts a fresh interpreter, so what a command
imports before it works is paid once per process. Each command below runs ``--rounds`` times
per tree, the trees alternating (old, new, old, new, ...), on one migrated SQLite database
holding a campaign; printed: per command and tree the median CPU seconds (user + system of the
child, from ``getrusage(RUSAGE_CHILDREN)``) and the new tree's over the old::

    python benchmarks/cli_startup.py --base 685ac69 --rounds 8

The old tree is laid out by ``first_contact.materialize`` (``git archive``, first on
``PYTHONPATH``); the new tree is this checkout as installed. Timings drift on a shared machine:
compare within one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from first_contact import Tree, materialize

CLI = "import sys; from xe2tune.cli import main; sys.argv[0] = 'xe2tune'; main()"


def commands(db: str) -> dict[str, list[str]]:
    return {
        "--help": ["--help"],
        "results": ["results", "--db", db],
        "campaign list": ["campaign", "list", "--db", db],
        "campaign status": ["campaign", "status", "--campaign", "1", "--db", db, "--json"],
        "best (nothing tuned)": ["best", "--head-dim", "64", "--seq", "64", "--dtype", "fp16",
                                 "--db", db],
        "bench (bad dtype)": ["bench", "--head-dim", "64", "--seq", "64", "--dtype", "fp64"],
    }


def cpu_seconds(tree: Tree, args: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one run of the CLI with ``args`` (any exit status)."""
    def children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    before = children()
    subprocess.run([sys.executable, "-c", CLI, *args], env=tree.env(env),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return children() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="git revision of the old tree")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="xe2tune-cli-startup-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "XE2TUNE_DATA_DIR": str(work / "data")}
        db = f"sqlite:///{work / 'tune.db'}"
        new = Tree("new (this checkout)", Path(__file__).resolve().parents[1], None)
        trees = [materialize(args.base, work / "old"), new]
        setup = [["migrate", "--db", db],
                 ["campaign", "create", "--head-dim", "64", "--seq", "256", "--db", db]]
        for step in setup:
            subprocess.run([sys.executable, "-c", CLI, *step], env=new.env(env), check=True,
                           capture_output=True)
        seconds: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, argv in commands(db).items():
                for tree in trees:
                    seconds.setdefault((name, tree.label), []).append(
                        cpu_seconds(tree, argv, env))
    old, new_label = trees[0].label, trees[1].label
    print(f"CPU seconds per command, medians of {args.rounds} alternating runs")
    print(f"{'command':24} {old:>10} {new_label:>10}  new/old")
    for name in commands(db):
        a = statistics.median(seconds[(name, old)])
        b = statistics.median(seconds[(name, new_label)])
        print(f"{name:24} {a:10.3f} {b:10.3f}  {b / a:7.2f}")


if __name__ == "__main__":
    main()
