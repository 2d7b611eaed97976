"""Several kernel families searched as one space: a problem's space on a device is their union.

The union's parameters are a ``family`` choice plus every member's parameters; a parameter a
member does not have takes the value None in that member's configs, so one optuna study (one
sampler, one budget) compares, say, the matrix-engine kernels with the vector-lane kernels on the
same problem. Every config keeps its member's name in ``LauncherConfig.family``, and every
per-config call is delegated to that member.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import Baseline, KernelFamily, LaunchPlan
from xe2tune.kernels._jit import source_hash
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import GridConfigs, ValidGrid

FAMILY_PARAM = "family"


class FamilyUnion:
    """A :class:`KernelFamily` over member families of one mode, in order of preference.

    Built for one problem (the members' parameter names are read from their spaces for it). The
    first available member's default is the union's default. Pure and thread-safe like its
    members.
    """

    needs_matrix_engine = False

    def __init__(self, members: Sequence[KernelFamily], problem: ProblemSpec) -> None:
        if len(members) < 2 or len({m.mode for m in members}) != 1:
            raise ValueError("a family union takes two or more families of one mode")
        self.members = tuple(members)
        self._by_name = {m.name: m for m in members}
        self.name = "+".join(m.name for m in members)
        self.mode = members[0].mode
        self.source_file = members[0].source_file
        self._names = tuple(self.parameter_space(problem))
        self._own = {m.name: tuple(m.parameter_space(problem)) for m in members}

    def member(self, name: str) -> KernelFamily:
        """The member family called ``name``.

        Raises:
            InvalidConfig: if no member has that name.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidConfig(
                f"family {name!r} is not searched here; accepted: {', '.join(self._by_name)}"
            ) from None

    def unavailable_reason(self, problem: ProblemSpec, caps: DeviceCaps) -> str | None:
        reasons = [m.unavailable_reason(problem, caps) for m in self.members]
        return None if None in reasons else "; ".join(r for r in reasons if r)

    def baselines(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Baseline, ...]:
        return tuple(b for m in self.members for b in m.baselines(problem, caps))

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        spaces = [m.parameter_space(problem) for m in self.members]
        merged: dict[str, list[Any]] = {FAMILY_PARAM: [m.name for m in self.members]}
        for space in spaces:
            for name, values in space.items():
                known = merged.setdefault(name, [])
                known.extend(v for v in values if v not in known)
        for name, values in merged.items():
            if name != FAMILY_PARAM:
                ordered = sorted(values) if all(isinstance(v, int) for v in values) else values
                merged[name] = ordered + ([None] if any(name not in s for s in spaces) else [])
        return merged

    def config_from_params(self, problem: ProblemSpec, params: Mapping[str, Any]) -> LauncherConfig:
        member = self.member(str(params.get(FAMILY_PARAM)))
        return member.config_from_params(
            problem, {n: params[n] for n in self._own[member.name] if n in params})

    def params_from_config(self, config: LauncherConfig) -> dict[str, Any]:
        own = self.member(config.family).params_from_config(config)
        params: dict[str, Any] = dict.fromkeys(self._names)
        params.update({n: own[n] for n in self._own[config.family]})
        params[FAMILY_PARAM] = config.family
        return params

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        for m in self.members:
            if m.unavailable_reason(problem, caps) is None:
                try:
                    return m.default_config(problem, caps)
                except InvalidProblem:
                    continue
        raise InvalidProblem(f"no family of {self.name} fits {problem.key()} on {caps.name}")

    def invalid_reason(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> str | None:
        member = self._by_name.get(config.family)
        if member is None:
            return f"family {config.family!r} is not one of {', '.join(self._by_name)}"
        return member.unavailable_reason(problem, caps) or member.invalid_reason(
            config, problem, caps)

    def valid_grid(self, problem: ProblemSpec, caps: DeviceCaps) -> ValidGrid:
        """The available members' valid points, member after member, in the union's space
        (a parameter a member lacks at its None).

        Raises:
            InvalidProblem: if a member cannot serve this problem at all.
        """
        space = {n: tuple(v) for n, v in self.parameter_space(problem).items()}
        blocks = [np.empty((0, len(space)), dtype=np.int64)]
        for m in self.members:
            if m.unavailable_reason(problem, caps) is not None:
                continue
            grid = m.valid_grid(problem, caps)
            own = list(grid.space)
            rows = np.empty((len(grid), len(space)), dtype=np.int64)
            for j, (name, values) in enumerate(space.items()):
                if name == FAMILY_PARAM:
                    rows[:, j] = values.index(m.name)
                elif name in grid.space:
                    # member value position -> union value position
                    where = np.array([values.index(v) for v in grid.space[name]], dtype=np.int64)
                    rows[:, j] = where[grid.ordinals[:, own.index(name)]]
                else:
                    rows[:, j] = values.index(None)
            blocks.append(rows)
        ordinals = np.concatenate(blocks)
        ordinals.setflags(write=False)
        return ValidGrid(space, ordinals)

    def valid_configs(self, problem: ProblemSpec, caps: DeviceCaps) -> Iterator[LauncherConfig]:
        return iter(GridConfigs(self.valid_grid(problem, caps),
                                functools.partial(self.config_from_params, problem)))

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        return self.member(config.family).plan(config, problem, caps, scale=scale)


def family_source_hash(family: KernelFamily) -> str:
    """The hash that identifies a family's kernel source (a union: of all its members')."""
    members = getattr(family, "members", None)
    if members is None:
        return source_hash(family.source_file)
    h = hashlib.sha256()
    for m in members:
        h.update(f"{m.name}={source_hash(m.source_file)};".encode())
    return h.hexdigest()[:16]
