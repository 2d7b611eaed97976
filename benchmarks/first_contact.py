"""The timeline of a first `xe2tune search --head-dim 128`: an old tree and this one side by side.

Each run starts cold, as on a new machine: a fresh data dir (so the device's ceilings are
measured once and the SQLite database is new) and a fresh cache dir (so the SYCL persistent
kernel cache, ``SYCL_CACHE_DIR`` under it, and the Xe2 compiler's outcome cache are empty; only
the native runtime-compiler extension is copied in, a one-time install step, not a kernel
cache; ``--cold-extension`` leaves it out too, so that each run compiles it first, as the first
command on a new machine does). The runs alternate old, new, old, new... and each is killed at
``--limit`` seconds::

    python benchmarks/first_contact.py --base 02e0b8a --rounds 1
    python benchmarks/first_contact.py --suite        # also `python -m pytest -q`, each tree

An old tree is ``git archive --base`` laid out as the installed ``xe2tune`` package and put
first on ``PYTHONPATH`` (the editable install's finder comes after it); the new tree is this
checkout as installed. Phases come from the run's own output: the seconds of the lines it prints
(start-up: process start to the ``device:`` line, after the device is open and its ceilings
measured; to the first ``study`` line; the first measured result shown: the first ``best so
far`` line, which a tree printing them shows after a study's first trial, else the first
``done ... best`` line) and its closing summary (builds, verification, measurement; a tree
that prints the ``and enumeration ...`` line adds enumeration, study setup, confirmation and
storage, else they are n/a). Timings on a shared machine drift: compare trees within one session.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = ("import sys; from xe2tune.cli import main; sys.argv[0] = 'xe2tune'; main()")
SUMMARY = re.compile(r"wall time (\d+) s; builds (\d+) s, verification (\d+) s, "
                     r"measurement (\d+) s")
EXTRA = re.compile(r"and enumeration ([\d.]+) s, study setup ([\d.]+) s, confirmation "
                   r"([\d.]+) s, storage ([\d.]+) s")
PACKAGES = ("kernels", "harness", "tuner", "db", "api", "dashboards")
PHASES = ("start-up to device ready", "start-up to first study", "enumeration", "study setup",
          "between studies (lines)", "builds", "verification", "measurement", "confirmation",
          "storage", "search wall (reported)", "first result line at",
          "last result line to exit", "total wall")


@dataclass
class Tree:
    """A tree to run: its name, the PYTHONPATH that makes it ``xe2tune`` (None: installed)."""

    name: str
    root: Path
    pythonpath: Path | None

    @property
    def label(self) -> str:
        """A short word for the tree: "new", or the old tree's revision."""
        return self.name.split()[1] if self.pythonpath is not None else self.name.split()[0]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.pythonpath is not None:
            env["PYTHONPATH"] = str(self.pythonpath)
        return env


@dataclass
class Run:
    lines: list[tuple[float, str, str]] = field(default_factory=list)  # (s, stream, text)
    total_s: float = 0.0
    returncode: int | None = None
    killed: bool = False

    def first(self, stream: str, pattern: str) -> float | None:
        rx = re.compile(pattern)
        return next((t for t, s, text in self.lines if s == stream and rx.search(text)), None)

    def phases(self) -> dict[str, float | None]:
        out: dict[str, float | None] = dict.fromkeys(PHASES)
        out["start-up to device ready"] = self.first("err", r"^device: ")
        out["start-up to first study"] = self.first("out", r"^study ")
        out["first result line at"] = self.first("out", r"^(best so far |done .* best \d)")
        out["total wall"] = self.total_s
        # the gaps before each `study` line (device ready or the last `done` line to it): every
        # study's enumeration and setup, seen the same way in a tree that does not report them
        marks = [(t, text.split()[0]) for t, s, text in self.lines
                 if s == "out" and re.match(r"(study|done) ", text)]
        ready = out["start-up to device ready"]
        if ready is not None and marks:
            starts = [t for t, word in marks if word == "study"]
            dones = [t for t, word in marks if word == "done"]
            out["between studies (lines)"] = sum(
                t - max([ready] + [d for d in dones if d < t]) for t in starts)
            if dones and not self.killed:
                out["last result line to exit"] = self.total_s - dones[-1]
        text = "\n".join(line for _, s, line in self.lines if s == "out")
        if m := SUMMARY.search(text):
            (out["search wall (reported)"], out["builds"], out["verification"],
             out["measurement"]) = map(float, m.groups())
        if m := EXTRA.search(text):
            out["enumeration"], out["study setup"], out["confirmation"], out["storage"] = map(
                float, m.groups())
        return out


def materialize(base: str, into: Path) -> Tree:
    """``base`` as an importable ``xe2tune`` package under ``into`` (the git tree is untouched)."""
    src = into / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", base], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    root = into / "root"
    shutil.copytree(src / "src" / "xe2tune", root / "xe2tune")
    for package in PACKAGES:  # top-level dirs installed as xe2tune.<dir> (pyproject.toml)
        if (src / package).is_dir():
            shutil.copytree(src / package, root / "xe2tune" / package)
    return Tree(f"old {base}", src, root)


def cold_env(work: Path, with_extension: bool = True) -> dict[str, str]:
    """An environment with a fresh data dir and empty kernel caches under ``work``; the native
    extension copied in unless ``with_extension`` is false (then the run compiles it first, as
    on a new machine)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("XE2TUNE_DB", "SYCL_CACHE_DIR", "XE2TUNE_CACHE_DIR", "XE2TUNE_DATA_DIR")}
    data, cache = work / "data", work / "cache"
    data.mkdir(parents=True)
    cache.mkdir()
    native = Path(os.environ.get("XE2TUNE_CACHE_DIR") or
                  Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xe2tune"
                  ) / "native"
    if with_extension and native.is_dir():
        shutil.copytree(native, cache / "native")
    env.update(XE2TUNE_DATA_DIR=str(data), XE2TUNE_CACHE_DIR=str(cache),
               XDG_DATA_HOME=str(work / "xdg-data"), PYTHONUNBUFFERED="1", COLUMNS="400",
               TERM="dumb")
    return env


def run_timed(argv: list[str], env: dict[str, str], cwd: Path, limit_s: float,
              echo: str | None) -> Run:
    """Run ``argv``, timestamping every line of its stdout and stderr; kill it at ``limit_s``."""
    run = Run()
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def pump(stream, name: str) -> None:  # noqa: ANN001  (a text pipe)
        for line in stream:
            t = time.perf_counter() - started
            run.lines.append((t, name, line.rstrip("\n")))
            if echo is not None and line.strip():
                print(f"  [{echo} {t:7.1f} s {name}] {line.rstrip()[:150]}", flush=True)

    readers = [threading.Thread(target=pump, args=(proc.stdout, "out")),
               threading.Thread(target=pump, args=(proc.stderr, "err"))]
    for r in readers:
        r.start()
    try:
        run.returncode = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        run.killed = True
        os.killpg(proc.pid, 9)
        run.returncode = proc.wait()
    for r in readers:
        r.join()
    run.total_s = time.perf_counter() - started
    return run


def _cell(values: list[float | None]) -> str:
    seen = [v for v in values if v is not None]
    if not seen:
        return "n/a"
    mid = statistics.median(seen)
    return f"{mid:.1f} s" if len(seen) == 1 else f"{mid:.1f} s (n={len(seen)})"


def print_table(title: str, trees: list[Tree], runs: dict[str, list[Run]],
                rows: tuple[str, ...]) -> None:
    print(f"\n{title}")
    width = max(len(r) for r in rows) + 2
    print("".ljust(width) + "".join(t.name.rjust(22) for t in trees))
    for row in rows:
        cells = [_cell([r.phases()[row] for r in runs[t.name]]) for t in trees]
        print(row.ljust(width) + "".join(c.rjust(22) for c in cells))
    for t in trees:
        for i, r in enumerate(runs[t.name]):
            state = "killed at the limit" if r.killed else f"exit {r.returncode}"
            print(f"{t.name} run {i + 1}: {state}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", action="append",
                    help="an old tree's git revision (repeat for more; default 02e0b8a)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each tree, alternating")
    ap.add_argument("--limit", type=float, default=900.0, help="seconds before a run is killed")
    ap.add_argument("--search-args", default="--head-dim 128",
                    help="the search's arguments (e.g. add --timeout 240 for a shorter run)")
    ap.add_argument("--suite", action="store_true",
                    help="also time `python -m pytest -q` in each tree (15+ min each)")
    ap.add_argument("--suite-limit", type=float, default=3600.0)
    ap.add_argument("--cold-extension", action="store_true",
                    help="do not copy the native extension in: each run compiles its own first")
    ap.add_argument("--quiet", action="store_true", help="do not echo the runs' lines")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="first-contact-") as tmp:
        work = Path(tmp)
        trees = [materialize(base, work / f"old-{i}")
                 for i, base in enumerate(args.base or ["02e0b8a"])]
        trees.append(Tree("new (this checkout)", REPO, None))
        runs: dict[str, list[Run]] = {t.name: [] for t in trees}
        argv = [sys.executable, "-c", CLI, "search", *args.search_args.split()]
        for round_ in range(args.rounds):
            for tree in trees:
                run_dir = work / f"run-{round_}-{len(runs[tree.name])}-{tree.label}"
                print(f"round {round_ + 1}: {tree.name}: xe2tune search {args.search_args}",
                      flush=True)
                runs[tree.name].append(run_timed(
                    argv, tree.env(cold_env(run_dir, not args.cold_extension)), run_dir,
                    args.limit,
                    None if args.quiet else tree.label))
        print_table(f"xe2tune search {args.search_args}: seconds, cold start (median of "
                    f"{args.rounds} alternating run(s) per tree)", trees, runs, PHASES)

        if args.suite:
            suite: dict[str, list[Run]] = {t.name: [] for t in trees}
            for tree in trees:
                suite_dir = work / f"suite-{tree.label}"
                env = tree.env(cold_env(suite_dir, not args.cold_extension))
                if tree.pythonpath is not None:
                    # the tests start `xe2tune` by name: the old tree's, not the installed one
                    bin_dir = suite_dir / "bin"
                    bin_dir.mkdir()
                    shim = bin_dir / "xe2tune"
                    shim.write_text(f"#!{sys.executable}\n{CLI.replace('; ', chr(10))}\n")
                    shim.chmod(0o755)
                    env["PATH"] = f"{bin_dir}:{env['PATH']}"
                print(f"suite: {tree.name}: python -m pytest -q", flush=True)
                suite[tree.name].append(run_timed([sys.executable, "-m", "pytest", "-q"], env,
                                                  tree.root, args.suite_limit, None))
                tail = [text for _, s, text in suite[tree.name][-1].lines if s == "out"][-1:]
                print(f"  {tail[0] if tail else '(no output)'}")
            print_table("python -m pytest -q: seconds", trees, suite, ("total wall",))


if __name__ == "__main__":
    main()
