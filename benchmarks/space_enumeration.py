"""How long a study's search space takes to build: point by point vs judged over the grid.

Usage:
  python benchmarks/space_enumeration.py [--device cpu|b580|...] [--head-dim 128] [--rounds 3]

For the default problems of ``xe2tune search --head-dim D`` on the device (``cpu``: the live
``opencl:cpu`` device; any other value: that catalog device), times the two ways to build what
``StudyRun`` starts from, in alternating rounds (point by point first in even rounds, the grid
first in odd ones), in this process:

- point by point, as before the grid: ``config_from_params`` and ``invalid_reason`` for every
  point of ``itertools.product`` over the family's space, then ``FiniteSpace.from_params`` of
  the valid configs' params (what ``valid_space`` did);
- the grid: ``valid_space`` now, i.e. ``valid_grid`` (each rule judged over the values of the
  parameters it reads, then broadcast) and ``FiniteSpace.from_ordinals``; configs are made when
  asked for.

Checks that both give the same space, then prints per problem the valid and Cartesian counts,
each side's median time and their ratio.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from xe2tune.kernels import DeviceCaps, KernelFamily, ProblemSpec, catalog_device, search_family
from xe2tune.tuner import FiniteSpace
from xe2tune.tuner._problems import ProblemOverrides, default_problems
from xe2tune.tuner._study import valid_space


def point_by_point(family: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> FiniteSpace:
    """The space built as ``valid_space`` did before the grid."""
    params = family.parameter_space(problem)
    configs = []
    for members in getattr(family, "members", (family,)):
        if members.unavailable_reason(problem, caps) is not None:
            continue
        space = members.parameter_space(problem)
        for values in itertools.product(*space.values()):
            config = members.config_from_params(problem, dict(zip(space, values, strict=True)))
            if members.invalid_reason(config, problem, caps) is None:
                configs.append(config)
    return FiniteSpace.from_params(params, [family.params_from_config(c) for c in configs])


def grid(family: KernelFamily, problem: ProblemSpec, caps: DeviceCaps) -> FiniteSpace:
    return valid_space(family, problem, caps)[0]


def label(p: ProblemSpec) -> str:
    kv = f" kv {p.kv_dtype}" if p.kv_dtype else ""
    return (f"{p.mode} D{p.head_dim}/{p.head_dim_v} {p.dtype}{kv}{' causal' if p.causal else ''}"
            f" {p.q_len}x{p.kv_len} {p.heads_q}/{p.heads_kv} heads")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu (live opencl:cpu) or a catalog key")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.device == "cpu":
        from xe2tune.harness import device_caps, open_queue

        caps = device_caps(open_queue("opencl:cpu").sycl_device)
    else:
        caps = catalog_device(args.device).caps
    problems = default_problems(args.head_dim, on_gpu=caps.device_type == "gpu",
                                overrides=ProblemOverrides())
    print(f"{caps.name}, head dim {args.head_dim}, {args.rounds} alternating rounds")
    print(f"{'problem':<50} {'family':<34} {'valid':>7} {'cartesian':>9} {'points s':>8} "
          f"{'grid s':>7} {'ratio':>6}")
    ways = {"points": point_by_point, "grid": grid}
    for problem in problems:
        family = search_family(problem, caps)
        times: dict[str, list[float]] = {name: [] for name in ways}
        spaces: dict[str, FiniteSpace] = {}
        for r in range(args.rounds):
            for name in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
                started = time.perf_counter()
                spaces[name] = ways[name](family, problem, caps)
                times[name].append(time.perf_counter() - started)
        a, b = spaces["points"], spaces["grid"]
        assert a.values == b.values and (a.ordinals == b.ordinals).all(), problem.key()
        points, fast = statistics.median(times["points"]), statistics.median(times["grid"])
        print(f"{label(problem):<50} {family.name[:34]:<34} {len(b):>7} "
              f"{b.cartesian_size:>9} {points:>8.3f} {fast:>7.3f} {points / fast:>6.0f}")


if __name__ == "__main__":
    main()
