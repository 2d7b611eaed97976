"""Trials per minute of one campaign with 1, 2, 3 ... workers on this machine.

Each run gets a fresh PostgreSQL database holding the device's stated ceilings, registers one
campaign (two tiny decode problems), starts N ``xe2tune worker`` processes and reads the
trials' completion times back from optuna's tables. Reported per N: the wall time of the
workers, the trials, trials per minute over the wall time, and over the steady state (first to
last completed trial, which leaves out start-up and the confirmation rounds).

    python benchmarks/campaign_throughput.py --workers 1,2,3 --trials 8
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from pathlib import Path

import optuna
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from xe2tune.cli._session import listing_for, save_measured, stored_peaks
from xe2tune.db import open_store
from xe2tune.harness import Ceilings, open_queue

SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PROBLEMS = ["--head-dim", "64", "--mode", "decode", "--seq", "64,128", "--dtype", "fp16",
            "--heads-q", "4", "--heads-kv", "2"]
XE2TUNE = str(Path(sys.executable).with_name("xe2tune"))


def fresh_database(server: str) -> str:
    name = f"xe2t_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    store = open_store(url)
    listing = listing_for(open_queue("opencl:cpu"))
    device_id, _ = stored_peaks(store, listing)
    save_measured(store, listing, device_id,
                  Ceilings(fma_fp32=60e9, fma_fp16=60e9, copy_bandwidth=20e9))
    store.close()
    return url


def drop_database(server: str, url: str) -> None:
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def run(workers: int, trials: int, server: str) -> dict[str, float]:
    url = fresh_database(server)
    subprocess.run([XE2TUNE, "campaign", "create", *PROBLEMS, "--trials", str(trials),
                    "--sampler", "random", "--confirm-rounds", "1", "--db", url, "--json"],
                   check=True, capture_output=True)
    started = time.perf_counter()
    processes = [subprocess.Popen([XE2TUNE, "worker", "--campaign", "1", "--db", url,
                                   "--device", "opencl:cpu", "--json"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(workers)]
    for p in processes:
        p.wait()
    wall = time.perf_counter() - started
    storage = optuna.storages.RDBStorage(url)
    done = sorted(t.datetime_complete for s in optuna.get_all_study_summaries(storage)
                  for t in optuna.load_study(study_name=s.study_name, storage=storage).trials
                  if t.datetime_complete is not None)
    storage.engine.dispose()
    engine = create_engine(url)
    with engine.connect() as connection:  # where a trial's time goes, on average
        build, verify, bench = connection.execute(text(
            "SELECT avg(build_s), avg(verify_s), avg(bench_s) FROM xe2t_trials")).one()
    engine.dispose()
    drop_database(server, url)
    steady = (done[-1] - done[0]).total_seconds()
    return {"workers": workers, "trials": len(done), "wall_s": wall, "build_s": build,
            "verify_s": verify, "bench_s": bench,
            "per_min_wall": len(done) / wall * 60,
            "per_min_steady": (len(done) - 1) / steady * 60 if steady > 0 else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--trials", type=int, default=8, help="trials per study (2 studies)")
    parser.add_argument("--server", default=SERVER)
    args = parser.parse_args()
    for n in (int(v) for v in args.workers.split(",")):
        r = run(n, args.trials, args.server)
        print(f"{r['workers']} workers: {r['trials']} trials in {r['wall_s']:.0f} s wall: "
              f"{r['per_min_wall']:.1f} trials/min (wall), {r['per_min_steady']:.1f} trials/min "
              f"(first to last completed trial); per trial: build {r['build_s']:.1f} s, verify "
              f"{r['verify_s']:.1f} s, timing {r['bench_s']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
