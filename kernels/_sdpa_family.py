"""What the prefill and decode families share: one mainloop, so one parameter vocabulary.

Parameters (the tuner's names) and where each lands in a LauncherConfig and in the C++:

======================  ==========================  ==========  =================================
parameter               LauncherConfig              define      meaning
======================  ==========================  ==========  =================================
``bq``                  shape_qk[0], shape_pv[0]    BQ          rows of a work-group's Q tile
``bk``                  shape_qk[1], shape_pv[2]    BK          keys per K/V block
``bd``                  shape_qk[2]                 BD          head-dim slice of the QK product
``bv``                  shape_pv[1]                 BV          V/O split width (VTILES = Dv/BV)
``stages``              stages                      STAGES      K/V blocks prefetched ahead
``subgroup_size``       subgroup_size               SG_SIZE     vector lanes of a tile register
``rows_per_item``       knob, subgroup_layout       TM          rows of one work-item's micro-tile
``kv_stage``            knob                        KV_STAGE    stage K^T/V in local memory
``kv_pack`` (prefill)   knob                        KV_STAGE=2  pack K^T/V tiles once, in global
======================  ==========================  ==========  =================================

A row is one (query position, query head of the GQA group) pair, so ``subgroup_layout`` is
(BQ / TM, 1): BQ / TM work-items along Q, one along K.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import Baseline
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import (
    GridConfigs,
    Rule,
    ValidGrid,
    check,
    first_reason,
    grid_mask,
)

DTYPE_CODES = {"fp32": 0, "fp16": 1, "bf16": 2}
KV_DTYPE_CODES = {"e4m3": 1, "e5m2": 2}  # XE2T_KV: FP8 K/V elements (sdpa_fp8.hpp)
VECTOR_WIDTHS = (4, 8, 16)  # sycl::vec sizes the tile ops accept (static_assert in C++)
LOG2E = math.log2(math.e)

COMMON_PARAMS = ("bq", "bk", "bd", "bv", "stages", "subgroup_size", "rows_per_item", "kv_stage")
COMMON_KNOBS = ("kv_stage", "rows_per_item")
BOOL_PARAMS = ("kv_stage", "kv_pack", "prefetch_shares")


def kv_variant_defines(problem: ProblemSpec) -> dict[str, int]:
    """XE2T_DV (Dv != D) and XE2T_KV (FP8 K/V), only for the problems that need them: an MHA/GQA
    build gets neither, so its sources, defines and code stay those of the plain kernels
    (tests/kernels/test_kv_variant_isolation.py compares them with the kernels before the
    variants)."""
    defines = {}
    if problem.is_mla:
        defines["DV"] = problem.head_dim_v
    if problem.kv_dtype is not None:
        defines["KV"] = KV_DTYPE_CODES[problem.kv_dtype]
    return defines


def kv_scale_args(problem: ProblemSpec) -> tuple[str, ...]:
    """The extra kernel argument of FP8 K/V builds: the ``kv_scale`` buffer [2, heads_kv]."""
    return ("kv_scale",) if problem.kv_dtype is not None else ()


@functools.cache
def _param_names(family: type[SdpaFamilyBase]) -> tuple[dict[str, None], tuple[str, ...],
                                                         tuple[str, ...]]:
    """A family's parameter names in order (as dict keys, for a set-like comparison with a
    point's), its integer ones and its boolean ones: made once per family class, as every
    config of a space is made from them."""
    names = COMMON_PARAMS + family.extra_knobs
    return (dict.fromkeys(names), tuple(n for n in names if n not in BOOL_PARAMS),
            tuple(n for n in names if n in BOOL_PARAMS))


@functools.lru_cache(maxsize=256)
def rules_of(family: SdpaFamilyBase, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
    """``family.rules(problem, caps)``, made once: a config checked alone would otherwise spend
    half its ``invalid_reason`` making the rules' closures."""
    return family.rules(problem, caps)


class SdpaFamilyBase:
    """Space, validation and config mapping of the shared SDPA mainloop.

    Subclasses set ``name``, ``mode``, ``source_file``, ``kernel_names``, ``extra_knobs`` and
    implement ``parameter_space``, ``default_config`` and ``_launches``. All methods are pure
    and thread-safe; returned objects are new and owned by the caller.
    """

    name: str
    mode: str
    source_file: str
    kernel_names: tuple[str, ...]
    extra_knobs: tuple[str, ...] = ()
    # Knobs added after configs were first stored: a stored config without one means this value.
    knob_defaults: Mapping[str, Any] = {}
    needs_matrix_engine = False

    def unavailable_reason(self, problem: ProblemSpec, caps: DeviceCaps) -> str | None:
        """None for any problem of the family's mode: the vector-lane kernels run everywhere.

        Raises:
            Nothing: every failure is a reason string.
        """
        if problem.mode != self.mode:
            return f"family {self.name} serves mode {self.mode}, the problem is {problem.mode}"
        return None

    def baselines(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Baseline, ...]:
        """Empty: no published configs exist for the vector-lane (CPU) kernels.

        Raises:
            Nothing.
        """
        return ()

    # --- the space -------------------------------------------------------------------------
    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        raise NotImplementedError

    def _check_problem(self, problem: ProblemSpec) -> None:
        if problem.mode != self.mode:
            raise InvalidProblem(
                f"family {self.name} serves mode {self.mode}, the problem is {problem.mode}"
            )

    def config_from_params(
        self, problem: ProblemSpec, params: Mapping[str, Any]
    ) -> LauncherConfig:
        """Turn one point of :meth:`parameter_space` into a LauncherConfig.

        Raises:
            InvalidConfig: if a parameter is missing, unknown or of the wrong kind.
        """
        names, int_names, bool_names = _param_names(type(self))
        params = {**self.knob_defaults, **params}
        if params.keys() != names.keys():
            missing = [n for n in names if n not in params]
            unknown = sorted(set(params) - set(names))
            raise InvalidConfig(
                f"{self.name} parameters: missing {missing or 'none'}, unknown {unknown or 'none'}"
                f"; accepted: {', '.join(names)}"
            )
        try:
            ints = {n: int(params[n]) for n in int_names}
        except (TypeError, ValueError) as exc:
            raise InvalidConfig(f"{self.name} parameters must be integers: {exc}") from exc
        for n in bool_names:
            if not isinstance(params[n], (bool, int)):
                raise InvalidConfig(f"{n} must be a boolean")
        bq, tm = ints["bq"], ints["rows_per_item"]
        knobs = [("rows_per_item", tm), ("kv_stage", bool(params["kv_stage"]))]
        knobs += [(n, bool(params[n]) if n in bool_names else ints[n])
                  for n in self.extra_knobs]
        return LauncherConfig(
            family=self.name,
            shape_qk=(bq, ints["bk"], ints["bd"]),
            shape_pv=(bq, ints["bv"], ints["bk"]),
            shape_out=(bq, problem.head_dim_v),
            # rows_per_item > BQ is invalid (invalid_reason says why); the layout stays >= 1.
            subgroup_layout=(max(1, bq // tm) if tm > 0 else 1, 1),
            stages=ints["stages"],
            subgroup_size=ints["subgroup_size"],
            knobs=tuple(knobs),
        )

    def params_from_config(self, config: LauncherConfig) -> dict[str, Any]:
        """Inverse of :meth:`config_from_params`.

        Raises:
            InvalidConfig: if the config lacks a knob of this family or has one it does not know.
        """
        knobs = {**self.knob_defaults, **dict(config.knobs)}
        expected = set(COMMON_KNOBS + self.extra_knobs)
        if set(knobs) != expected:
            raise InvalidConfig(
                f"{self.name} configs take the knobs {', '.join(sorted(expected))}; got "
                f"{', '.join(sorted(knobs)) or 'none'}"
            )
        for name, value in knobs.items():
            # A stored or hand-written config may carry any JSON value; bool is an int in Python.
            kind_ok = (isinstance(value, bool) or value in (0, 1) if name in BOOL_PARAMS
                       else isinstance(value, int) and not isinstance(value, bool))
            if not kind_ok:
                kind = "a boolean" if name in BOOL_PARAMS else "an integer"
                raise InvalidConfig(f"{self.name} knob {name} must be {kind}, got {value!r}")
        params: dict[str, Any] = {
            "bq": config.bq, "bk": config.bk, "bd": config.bd, "bv": config.bv,
            "stages": config.stages, "subgroup_size": config.subgroup_size,
        }
        params.update({n: bool(knobs[n]) if n in BOOL_PARAMS else int(knobs[n])
                       for n in COMMON_KNOBS + self.extra_knobs})
        return params

    # --- validation ------------------------------------------------------------------------
    def invalid_reason(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> str | None:
        """None if the config can run, else why not (mirrors the kernel's static_asserts).

        Raises:
            Nothing: every failure is a reason string.
        """
        reason = self.unavailable_reason(problem, caps)
        if reason is not None:
            return reason
        p = self._well_formed_params(config, problem)
        if isinstance(p, str):
            return p
        return first_reason(rules_of(self, problem, caps), p) or self._off_grid_reason(p, problem)

    def _well_formed_params(self, config: LauncherConfig,
                            problem: ProblemSpec) -> dict[str, Any] | str:
        """The config's parameters, or why it is not a well-formed point of the family's
        vocabulary.

        Every config :meth:`config_from_params` makes from a point of the space is well formed,
        so :meth:`valid_grid` skips these checks; a stored or hand-written config may not be.
        """
        if config.family != self.name:
            return f"the config is of family {config.family}, not {self.name}"
        try:
            p = self.params_from_config(config)
        except InvalidConfig as exc:
            return exc.reason
        bq, bk, bv, tm = p["bq"], p["bk"], p["bv"], p["rows_per_item"]
        if min(bq, bk, p["bd"], bv, p["subgroup_size"], tm) < 1:
            return "tile sizes, subgroup_size and rows_per_item must be >= 1"
        if config.shape_pv != (bq, bv, bk):
            return f"shape_pv must be (BQ, BV, BK) = ({bq}, {bv}, {bk}), got {config.shape_pv}"
        if config.shape_out != (bq, problem.head_dim_v):
            return (f"shape_out must be (BQ, Dv) = ({bq}, {problem.head_dim_v}), got "
                    f"{config.shape_out}")
        # When rows_per_item does not divide BQ no layout is right: a rule says why.
        if bq % tm == 0 and config.subgroup_layout != (bq // tm, 1):
            return (f"subgroup_layout must be (BQ / rows_per_item, 1) = ({bq // tm}, 1), got "
                    f"{config.subgroup_layout}")
        return p

    def rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        """The rules a point of the space must pass for this problem and device, in the order
        :meth:`invalid_reason` reports them.

        Raises:
            Nothing.
        """
        d, dv = problem.head_dim, problem.head_dim_v
        widths, sizes = ", ".join(map(str, VECTOR_WIDTHS)), ", ".join(
            map(str, caps.sub_group_sizes))

        def divides(divisor: str, what: str, name: str) -> Rule:
            return check((divisor, what), lambda p: p[what] % p[divisor] == 0,
                         lambda p: f"{divisor} {p[divisor]} must divide {name} {p[what]}")

        def items(p: Mapping[str, Any]) -> int:
            return p["bq"] // p["rows_per_item"]

        def local(p: Mapping[str, Any]) -> int:
            return self.local_bytes(p, problem)

        return (
            check(("subgroup_size",), lambda p: p["subgroup_size"] in VECTOR_WIDTHS,
                  lambda p: f"subgroup_size {p['subgroup_size']} is not a vector width of the "
                  f"tile ops ({widths})"),
            check(("subgroup_size",), lambda p: p["subgroup_size"] in caps.sub_group_sizes,
                  lambda p: f"subgroup_size {p['subgroup_size']} is not supported by the device "
                  f"({sizes})"),
            check(("bd",), lambda p: d % p["bd"] == 0,
                  lambda p: f"BD {p['bd']} must divide the head dim {d}"),
            divides("subgroup_size", "bd", "BD"),
            divides("subgroup_size", "bk", "BK"),
            divides("subgroup_size", "bv", "BV"),
            check(("bv",), lambda p: dv % p["bv"] == 0,
                  lambda p: f"BV {p['bv']} must divide the V head dim {dv} (VTILES = Dv / BV)"),
            divides("rows_per_item", "bq", "BQ"),
            check(("bq", "rows_per_item"), lambda p: items(p) <= caps.max_work_group_size,
                  lambda p: f"work-group of {items(p)} work-items exceeds the device maximum "
                  f"{caps.max_work_group_size}"),
            check(("bk", *self._layout_knobs()), lambda p: local(p) <= caps.local_mem_bytes,
                  lambda p: f"local memory {local(p)} B exceeds the device's "
                  f"{caps.local_mem_bytes} B"),
            check((), lambda p: problem.dtype != "fp16" or caps.has_fp16,
                  lambda p: "the device has no fp16 support"),
            check((), lambda p: problem.dtype != "bf16" or caps.has_bf16,
                  lambda p: "the device has no bf16 support"),
            *self._extra_rules(problem, caps),
        )

    def _layout_knobs(self) -> tuple[str, ...]:
        """The knobs :meth:`kv_layout` reads in this family."""
        return tuple(n for n in ("kv_stage", "kv_pack") if n in COMMON_KNOBS + self.extra_knobs)

    def _off_grid_reason(self, params: Mapping[str, Any], problem: ProblemSpec) -> str | None:
        """Why a parameter is outside the space, if one is (never for a point of the grid).

        The space bounds what is ever compiled: a config passing every other check can still
        be absurd (rows_per_item 4096 on BQ 4096 keeps the runtime compiler busy for minutes).
        """
        for name, values in self.parameter_space(problem).items():
            if params[name] not in values:
                accepted = ", ".join(str(v).lower() if isinstance(v, bool) else str(v)
                                     for v in values)
                return (f"{name} {params[name]} is outside the {self.name} space for this "
                        f"problem; accepted: {accepted}")
        return None

    def _extra_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        """A subclass's own rules, checked after the shared ones."""
        return ()

    @staticmethod
    def kv_layout(params: Mapping[str, Any]) -> int:
        """KV_STAGE in C++: 0 K/V read in place, 1 staged in local memory, 2 packed tiles."""
        return 2 if params.get("kv_pack") else int(params["kv_stage"])

    @classmethod
    def local_bytes(cls, params: Mapping[str, Any], problem: ProblemSpec) -> int:
        """Work-group local memory: fp32 K^T and V blocks when staged (LOCAL_FLOATS in C++)."""
        if cls.kv_layout(params) != 1:
            return 4
        return 4 * params["bk"] * (problem.head_dim + problem.head_dim_v)

    def valid_grid(self, problem: ProblemSpec, caps: DeviceCaps) -> ValidGrid:
        """The points of the space that :meth:`invalid_reason` accepts, judged rule by rule
        over the whole grid (tests/kernels/test_valid_grid.py checks it point by point).

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        space = self.parameter_space(problem)
        if self.unavailable_reason(problem, caps) is not None:
            return ValidGrid.from_mask(space, np.zeros([len(v) for v in space.values()], bool))
        return ValidGrid.from_mask(
            space, grid_mask(space, self.rules(problem, caps), fixed=self.knob_defaults))

    def valid_configs(self, problem: ProblemSpec, caps: DeviceCaps) -> Iterator[LauncherConfig]:
        """Every config of the space that :meth:`invalid_reason` accepts, in the order of
        ``itertools.product`` over the space.

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        return iter(GridConfigs(self.valid_grid(problem, caps),
                                functools.partial(self.config_from_params, problem)))

    def _first_valid(
        self, candidates: Sequence[Mapping[str, Any]], problem: ProblemSpec, caps: DeviceCaps
    ) -> LauncherConfig:
        # A problem the family cannot serve at all fails with its reason, not after every
        # config of the space was tried in vain.
        if (reason := self.unavailable_reason(problem, caps)) is not None:
            raise InvalidProblem(reason)
        for params in candidates:
            config = self.config_from_params(problem, params)
            if self.invalid_reason(config, problem, caps) is None:
                return config
        for config in self.valid_configs(problem, caps):
            return config
        raise InvalidProblem(f"no {self.name} config fits {problem.key()} on {caps.name}")

    # --- build and launch ------------------------------------------------------------------
    def defines(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> dict[str, int]:
        """The compile-time parameters of one build (become -DXE2T_<NAME>=value).

        VREGS, the device's register file in SG_SIZE-lane vectors, bounds the accumulator
        micro-tiles: more accumulators than registers spill, fewer leave FMA latency exposed.
        """
        p = self.params_from_config(config)
        return {
            "VREGS": caps.vector_registers(p["subgroup_size"]),
            "D": problem.head_dim, "DTYPE": DTYPE_CODES[problem.dtype], "BQ": p["bq"],
            "BK": p["bk"], "BD": p["bd"], "BV": p["bv"], "VTILES": config.vtiles,
            "STAGES": config.stages, "SG_SIZE": p["subgroup_size"], "TM": p["rows_per_item"],
            "KV_STAGE": self.kv_layout(p), **kv_variant_defines(problem),
        }

    @staticmethod
    def qscale(problem: ProblemSpec, scale: float | None) -> float:
        """Softmax scale times log2(e): the kernels pre-scale Q and use exp2."""
        return (problem.scale if scale is None else float(scale)) * LOG2E

    def require_valid(self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps) -> None:
        """Raise InvalidConfig with the reason unless the config can run."""
        reason = self.invalid_reason(config, problem, caps)
        if reason is not None:
            raise InvalidConfig(reason)
