"""What the xmx prefill and decode families share: the matrix-engine mainloop's vocabulary.

The kernels (``sdpa_xmx_*.cpp``, ``sdpa_xmx_mainloop.hpp``) are subgroup-cooperative: a
work-group of ``sg_q x sg_k`` subgroups of 16 lanes owns BQ rows (query positions x GQA group
heads, as the vector-lane kernels pack them); subgroup (sq, sk) holds BQ / sg_q rows in whole
8-row DPAS fragments and, of every K block, a BK / sg_k key share in whole 16-key fragments.
Its fragments live in the Xe DPAS register layout and are loaded, multiplied and reduced through
one set of tile ops (``sdpa_xmx_ops.hpp``) over primitives chosen at compile time
(``sdpa_xe_builtins.hpp``): the native Xe built-ins (2D block loads and prefetches, DPAS) on an
Intel GPU whose matrix engine has the 8 x 16 x 16 shape, their emulation by subgroup shuffles
elsewhere (the CPU device, where the correctness grid runs).

======================  ==========================  ==========  ==============================
parameter               LauncherConfig              define      meaning
======================  ==========================  ==========  ==============================
``bq``                  shape_qk[0], shape_pv[0]    BQ          rows of a work-group
``bk``                  shape_qk[1], shape_pv[2]    BK          keys per K/V block
``bd``                  shape_qk[2]                 BD          head-dim slice of the QK product
``bv``                  shape_pv[1]                 BV          V split width (VTILES = Dv/BV)
``sg_q``, ``sg_k``      subgroup_layout             SG_Q, SG_K  subgroups along rows and keys
``stages``              stages                      STAGES      K/V blocks prefetched ahead
``grf``                 knob                        GRF         registers per thread (128, 256)
``kv_chunk`` (decode)   knob                        run time    keys per phase-1 split
``dv_splits`` (decode)  knob (latent decode only)   DV_SPLITS   work-groups sharing V's columns
======================  ==========================  ==========  ==============================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.kernels._baselines import xmx_baseline_params
from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import Baseline
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._rules import Rule, check, first_reason
from xe2tune.kernels._sdpa_family import (
    DTYPE_CODES,
    SdpaFamilyBase,
    kv_variant_defines,
    rules_of,
)

SUBGROUP = 16  # DPAS and 2D block IO need SIMD16
DPAS_M, DPAS_N, DPAS_K = 8, 16, 16
DPAS_SHAPE = (DPAS_M, DPAS_N, DPAS_K)
SERVED_DTYPES = ("fp16", "bf16")  # the matrix engine's operand types; fp32 is not served
ELEMENT_BYTES = 2
GRF_SIZES = (128, 256)
NO_GRF_MODEL_GRF = 128  # the only grf value on a device without a register-file model
POLICIES = {"emulated": 0, "native": 1}
PREFETCH_COLUMNS = 32  # 16-bit columns of one 2D block prefetch message
# The register model's terms beyond the fragments (register_footprint): per 8-row fragment,
# and for the rest of the subgroup's state (C++ checks only the fragments: FRAGMENT_REGISTERS).
ROW_STATE_REGS = 2
RESERVED_REGS = 12
# FP8 K/V loaders (sdpa_xmx_fp8.hpp) hold a K row's bytes and conversion temporaries beside the
# fragments. Measured with IGC 2.40 for bmg, hd128 prefill: SageV1 (footprint 256 of 256)
# spills 4.2-4.4 KB with e4m3/e5m2 K/V, the SYCL*TLA example (208) and the 8-row fallback (110)
# do not; decode's default (8 rows, 64-key shares) does not either.
FP8_LOADER_REGS = 16

PARAMS = ("bq", "bk", "bd", "bv", "sg_q", "sg_k", "stages", "grf")


@dataclass(frozen=True)
class TileShape:
    """The fields of a LauncherConfig the register and local-memory models read, so validation
    can apply them to a point of the space without making its config."""

    bq: int
    bk: int
    bd: int
    subgroup_layout: tuple[int, int]
    dv_splits: int = 1

    # and dv_splits, where the problem's space holds it (latent decode)
    READS: ClassVar[tuple[str, ...]] = ("bq", "bk", "bd", "sg_q", "sg_k")

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> TileShape:
        """The shape of a params dict (it needs only the parameters in READS, and dv_splits
        where the space holds it)."""
        return cls(params["bq"], params["bk"], params["bd"], (params["sg_q"], params["sg_k"]),
                   params.get("dv_splits", 1))


def uses_native_builtins(caps: DeviceCaps) -> bool:
    """The native Xe built-ins need an Intel GPU with 8 x 16 x 16 DPAS (Xe2, Xe-HPC: these also
    have the 2D block messages); anything else runs their emulation."""
    return (caps.is_intel_gpu and caps.has_matrix_engine
            and tuple(caps.matrix_shape) == DPAS_SHAPE)


class XmxFamilyBase(SdpaFamilyBase):
    """Space mapping, validation and defines of the xmx mainloop (sdpa_xmx_mainloop.hpp).

    Subclasses set ``name``, ``mode``, ``source_file``, ``kernel_names``, ``extra_knobs`` and
    implement ``parameter_space``, ``default_config`` and ``plan``. All methods are pure and
    thread-safe; returned objects are new and owned by the caller.
    """

    needs_matrix_engine = True
    # Knobs only some problems' spaces hold (a config names them exactly when its problem does).
    optional_knobs: tuple[str, ...] = ()

    def dv_split_options(self, problem: ProblemSpec) -> tuple[int, ...]:
        """The ``dv_splits`` the family offers for this problem: (1,), all of V's columns in
        one work-group, unless a subclass splits them."""
        return (1,)

    def dv_split_reads(self, problem: ProblemSpec) -> tuple[str, ...]:
        """("dv_splits",) where the problem's space holds the knob, else (): what the rules on
        V's columns read beyond their own parameters."""
        return ("dv_splits",) if self.dv_split_options(problem) != (1,) else ()

    def baselines(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Baseline, ...]:
        """The published Xe2 configs of this mode and head dim (``kernels/_baselines.py``);
        none for a dtype the family does not serve.

        Raises:
            Nothing.
        """
        if problem.mode != self.mode or problem.dtype not in ("fp16", "bf16"):
            return ()
        return tuple(Baseline(label, self.config_from_params(problem, params))
                     for label, params in xmx_baseline_params(self.mode, problem.head_dim))

    # --- availability ----------------------------------------------------------------------
    def unavailable_reason(self, problem: ProblemSpec, caps: DeviceCaps) -> str | None:
        """None if this device can run the family's kernels for this problem, else why not.

        Raises:
            Nothing: every failure is a reason string.
        """
        reason = super().unavailable_reason(problem, caps) or self._dtype_reason(problem)
        if reason is not None:
            return reason
        if SUBGROUP not in caps.sub_group_sizes:
            return (f"{self.name} needs subgroups of {SUBGROUP} lanes; the device offers "
                    f"{', '.join(map(str, caps.sub_group_sizes)) or 'none'}")
        if not caps.required_subgroup_size_ok:
            return (f"{self.name} requires subgroup size {SUBGROUP}, which this OpenCL CPU "
                    "runtime rejects: start the process with CL_CONFIG_CPU_VECTORIZER_MODE=0")
        if problem.dtype == "fp16" and not caps.has_fp16:
            return "the device has no fp16 support"
        if problem.dtype == "bf16" and not caps.has_bf16:
            return "the device has no bf16 support"
        narrowest = problem.head_dim_v // max(self.dv_split_options(problem))
        o_regs = DPAS_M * narrowest * 4 // 64
        if caps.registers_per_thread and o_regs + RESERVED_REGS > max(caps.registers_per_thread):
            return (f"Dv {problem.head_dim_v}: one 8-row fragment of O alone takes {o_regs} of "
                    f"the {max(caps.registers_per_thread)} registers of {caps.name} (the "
                    f"{self.name} family keeps a subgroup's O [rows, Dv] fp32 in registers; "
                    "sdpa_decode/sdpa_prefill serve it)")
        return None

    def _dtype_reason(self, problem: ProblemSpec) -> str | None:
        if problem.dtype not in SERVED_DTYPES:
            return f"{self.name} serves {'/'.join(SERVED_DTYPES)}, not {problem.dtype}"
        if problem.head_dim_v > problem.head_dim:
            # The combine chunk [BQ, Dv / 2] fp32 reuses the local memory of Q [BQ, D].
            return (f"{self.name} needs Dv <= D (the combine reuses Q's local memory); got "
                    f"D {problem.head_dim}, Dv {problem.head_dim_v}")
        return None

    def _check_problem(self, problem: ProblemSpec) -> None:
        super()._check_problem(problem)
        reason = self._dtype_reason(problem)
        if reason is not None:
            raise InvalidProblem(reason)

    # --- the space -------------------------------------------------------------------------
    def config_from_params(
        self, problem: ProblemSpec, params: Mapping[str, Any]
    ) -> LauncherConfig:
        """Turn one point of :meth:`parameter_space` into a LauncherConfig.

        Raises:
            InvalidConfig: if a parameter is missing, unknown or not an integer.
        """
        names = PARAMS + self.extra_knobs
        missing = [n for n in names if n not in params]
        unknown = sorted(set(params) - set(names) - set(self.optional_knobs))
        if missing or unknown:
            raise InvalidConfig(
                f"{self.name} parameters: missing {missing or 'none'}, unknown {unknown or 'none'}"
                f"; accepted: {', '.join(names + self.optional_knobs)}"
            )
        optional = tuple(n for n in self.optional_knobs if n in params)
        try:
            p = {n: int(params[n]) for n in names + optional}
        except (TypeError, ValueError) as exc:
            raise InvalidConfig(f"{self.name} parameters must be integers: {exc}") from exc
        return LauncherConfig(
            family=self.name,
            shape_qk=(p["bq"], p["bk"], p["bd"]),
            shape_pv=(p["bq"], p["bv"], p["bk"]),
            shape_out=(p["bq"], problem.head_dim_v),
            subgroup_layout=(p["sg_q"], p["sg_k"]),
            stages=p["stages"],
            subgroup_size=SUBGROUP,
            knobs=(("grf", p["grf"]), *((n, p[n]) for n in self.extra_knobs + optional)),
        )

    def params_from_config(self, config: LauncherConfig) -> dict[str, Any]:
        """Inverse of :meth:`config_from_params`.

        Raises:
            InvalidConfig: if the config lacks a knob of this family or has one it does not know.
        """
        knobs = dict(config.knobs)
        expected = {"grf", *self.extra_knobs}
        if not expected <= set(knobs) <= expected | set(self.optional_knobs):
            optional = f" (and optionally {', '.join(self.optional_knobs)})" * bool(
                self.optional_knobs)
            raise InvalidConfig(
                f"{self.name} configs take the knobs {', '.join(sorted(expected))}{optional}; "
                f"got {', '.join(sorted(knobs)) or 'none'}"
            )
        params: dict[str, Any] = {
            "bq": config.bq, "bk": config.bk, "bd": config.bd, "bv": config.bv,
            "sg_q": config.subgroup_layout[0], "sg_k": config.subgroup_layout[1],
            "stages": config.stages, "grf": int(knobs["grf"]),
        }
        params.update({n: int(knobs[n]) for n in (*self.extra_knobs, *self.optional_knobs)
                       if n in knobs})
        return params

    # --- resources -------------------------------------------------------------------------
    @staticmethod
    def dv_columns(config: LauncherConfig | TileShape, problem: ProblemSpec) -> int:
        """V columns one work-group computes: Dv / ``dv_splits`` (XmxShape::DV in C++)."""
        splits = (config.dv_splits if isinstance(config, TileShape)
                  else int(config.knob("dv_splits", 1)))
        return problem.head_dim_v // splits

    @classmethod
    def fragment_registers(cls, config: LauncherConfig | TileShape, problem: ProblemSpec) -> int:
        """64-byte registers of one subgroup's fragments (Shape::FRAGMENT_REGISTERS in C++): a
        hard lower bound.

        Q [rows, BD] as fp16/bf16 (reloaded per D slice, as seed 000 does), S [rows, keys]
        fp32, P [rows, keys] as fp16/bf16 and O [rows, Dv / dv_splits] fp32, where rows =
        BQ / sg_q and keys = BK / sg_k are the subgroup's share.
        """
        sg_q, sg_k = config.subgroup_layout
        rows, keys = config.bq // sg_q, config.bk // sg_k

        def regs(nbytes: int) -> int:
            return -(-nbytes // 64)

        return (regs(rows * config.bd * ELEMENT_BYTES) + regs(rows * keys * 4)
                + regs(rows * keys * ELEMENT_BYTES)
                + regs(rows * cls.dv_columns(config, problem) * 4))

    @classmethod
    def register_footprint(cls, config: LauncherConfig | TileShape, problem: ProblemSpec) -> int:
        """64-byte registers one subgroup needs, as validation estimates them.

        :meth:`fragment_registers`, plus ROW_STATE_REGS per 8-row fragment (its row max, sum,
        rescale and last key, one register each, not all live at once), RESERVED_REGS for
        K/V operands, addresses and the thread payload, and FP8_LOADER_REGS with FP8 K/V. The
        first two constants are fitted to IGC 2.40's allocation for bmg
        (benchmarks/xe2_compile_sample.py; the README's table): the smallest that leave no
        sampled config the model accepts spilling.
        """
        rows = config.bq // config.subgroup_layout[0]
        fp8 = FP8_LOADER_REGS if problem.kv_dtype is not None else 0
        return (cls.fragment_registers(config, problem) + ROW_STATE_REGS * (rows // DPAS_M)
                + RESERVED_REGS + fp8)

    @classmethod
    def expected_matrix_mads(cls, config: LauncherConfig | TileShape, problem: ProblemSpec) -> int:
        """DPAS calls in the native build (SPIR-V calls of the matrix_mad built-in, and ``dpas``
        instructions in the Xe ISA).

        The fragment loops are fully unrolled and the K-block loop is not, so the program holds
        the multiply-adds of one K block once: MF * NF * D / 16 for S = Q K^T plus
        MF * NF * Dv / dv_splits / 16 for O += P V, with MF = BQ / sg_q / 8 row fragments and
        NF = BK / sg_k / 16 key fragments of one subgroup (other kernels of the program have
        none).
        """
        sg_q, sg_k = config.subgroup_layout
        mf = config.bq // sg_q // DPAS_M
        nf = config.bk // sg_k // DPAS_N
        return mf * nf * (problem.head_dim + cls.dv_columns(config, problem)) // DPAS_K

    @staticmethod
    def local_memory_bytes(config: LauncherConfig | TileShape, problem: ProblemSpec,
                           caps: DeviceCaps) -> int:
        """Work-group local memory (Mainloop::LOCAL_FLOATS * 4 in C++).

        Q of the tile [BQ, D] as fp16/bf16 (its area holds the [BQ, Dv / 2] fp32 combine chunk
        after the K loop) and the (m, l) rows [BQ, 2] fp32 when sg_k > 1. K/V tails need no local
        memory: the 2D block loads' bounds check reads 0 past kv_len.
        """
        total = config.bq * problem.head_dim * ELEMENT_BYTES
        if config.subgroup_layout[1] > 1:
            total += config.bq * 2 * 4
        return total

    # --- validation ------------------------------------------------------------------------
    def invalid_reason(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> str | None:
        """None if the config can run, else why not (mirrors sdpa_xmx_mainloop.hpp's Shape).

        Raises:
            Nothing: every failure is a reason string.
        """
        reason = self.unavailable_reason(problem, caps)
        if reason is not None:
            return reason
        p = self._well_formed_params(config, problem)
        return p if isinstance(p, str) else first_reason(rules_of(self, problem, caps), p)

    def _well_formed_params(self, config: LauncherConfig,
                            problem: ProblemSpec) -> dict[str, Any] | str:
        """The config's parameters, or why it is not a well-formed point of this family."""
        # LauncherConfig itself holds extents >= 1 and stages >= 0.
        if config.family != self.name:
            return f"the config belongs to family {config.family}, not {self.name}"
        try:
            p = self.params_from_config(config)
        except InvalidConfig as exc:
            return exc.reason
        bq, bk, bv = p["bq"], p["bk"], p["bv"]
        if config.shape_pv != (bq, bv, bk):
            return f"shape_pv must be (BQ, BV, BK) = ({bq}, {bv}, {bk}), got {config.shape_pv}"
        if config.shape_out != (bq, problem.head_dim_v):
            return (f"shape_out must be (BQ, Dv) = ({bq}, {problem.head_dim_v}), got "
                    f"{config.shape_out}")
        if config.subgroup_size != SUBGROUP:
            return f"subgroup_size must be {SUBGROUP} (DPAS), got {config.subgroup_size}"
        splits = self.dv_split_options(problem)
        if ("dv_splits" in p) != (splits != (1,)):
            return (f"dv_splits {p.get('dv_splits', 'absent')}: {self.name} takes "
                    + (f"one of {', '.join(map(str, splits))}" if splits != (1,) else "none")
                    + f" for Dv {problem.head_dim_v}")
        return p

    def rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        """The xmx mainloop's rules (sdpa_xmx_mainloop.hpp's Shape and the device model), as
        :meth:`SdpaFamilyBase.rules` states them."""
        d, dv = problem.head_dim, problem.head_dim_v
        splits = self.dv_split_options(problem)
        split_reads = self.dv_split_reads(problem)

        def cols(p: Mapping[str, Any]) -> int:
            # the checks on Dv hold for the columns one work-group computes
            return dv // p.get("dv_splits", 1)

        def whole(count: str, parts: str, fragment: int, what: str) -> Rule:
            return check((count, parts),
                         lambda p: p[count] % p[parts] == 0
                         and (p[count] // p[parts]) % fragment == 0,
                         lambda p: f"{what} {p[count]} / {p[parts]} must be a multiple of "
                         f"{fragment}")

        return (
            check(("grf",), lambda p: p["grf"] in GRF_SIZES,
                  lambda p: f"grf must be 128 or 256, got {p['grf']}"),
            # DPAS: a subgroup's rows are whole M = 8 fragments ...
            whole("bq", "sg_q", DPAS_M, "rows per subgroup BQ / sg_q ="),
            # ... its key share whole N = 16 fragments (2D block loads of 16 rows) ...
            whole("bk", "sg_k", DPAS_N, "keys per subgroup BK / sg_k ="),
            # ... and the D slice and V split whole K = 16 / N = 16 fragments.
            check(("bd",), lambda p: p["bd"] % DPAS_K == 0,
                  lambda p: f"BD {p['bd']} must be a multiple of {DPAS_K}"),
            check(("bv",), lambda p: p["bv"] % DPAS_N == 0,
                  lambda p: f"BV {p['bv']} must be a multiple of {DPAS_N}"),
            check(("bd",), lambda p: d % p["bd"] == 0,
                  lambda p: f"BD {p['bd']} must divide the head dim {d}"),
            *([check(split_reads, lambda p: p["dv_splits"] in splits,
                     lambda p: f"dv_splits {p['dv_splits']}: {self.name} takes one of "
                     f"{', '.join(map(str, splits))} for Dv {dv}")] if split_reads else []),
            check(("bv", *split_reads), lambda p: cols(p) % p["bv"] == 0,
                  lambda p: f"BV {p['bv']} must divide the V head dim {cols(p)} "
                  "(VTILES = Dv / BV)"),
            # The sg_k combine moves O in two column halves of whole fragments.
            check(split_reads, lambda p: cols(p) % (2 * DPAS_N) == 0,
                  lambda p: f"Dv {cols(p)} must be a multiple of {2 * DPAS_N}"),
            # K/V prefetch messages cover 32 columns.
            check((), lambda p: d % PREFETCH_COLUMNS == 0,
                  lambda p: f"the head dim {d} must be a multiple of {PREFETCH_COLUMNS}"),
            *self._device_rules(problem, caps),
            *self._extra_rules(problem, caps),
        )

    def _device_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        split_reads = self.dv_split_reads(problem)

        def items(p: Mapping[str, Any]) -> int:
            return p["sg_q"] * p["sg_k"] * SUBGROUP

        def regs(p: Mapping[str, Any]) -> int:
            return self.register_footprint(TileShape.of(p), problem)

        def local(p: Mapping[str, Any]) -> int:
            return self.local_memory_bytes(TileShape.of(p), problem, caps)

        rules = [check(("sg_q", "sg_k"), lambda p: items(p) <= caps.max_work_group_size,
                       lambda p: f"work-group of {items(p)} work-items ({p['sg_q']} x "
                       f"{p['sg_k']} subgroups of {SUBGROUP}) exceeds the device maximum "
                       f"{caps.max_work_group_size}")]
        offered = caps.registers_per_thread
        if not offered:
            # No register-file model (a CPU): the knob would only duplicate configs.
            rules.append(check(("grf",), lambda p: p["grf"] == NO_GRF_MODEL_GRF,
                               lambda p: f"grf {p['grf']} is an Intel GPU register-file mode; "
                               f"{caps.name} has none (use grf {NO_GRF_MODEL_GRF})"))
        else:
            large = caps.max_work_items_large_grf
            rules += [
                check(("grf",), lambda p: p["grf"] in offered,
                      lambda p: f"grf {p['grf']} is not offered by {caps.name} (registers per "
                      f"thread: {', '.join(map(str, offered))})"),
                check(("grf", "sg_q", "sg_k"),
                      lambda p: p["grf"] != max(GRF_SIZES) or items(p) <= large,
                      lambda p: f"with grf {p['grf']} a work-group holds at most "
                      f"{large // SUBGROUP} subgroups of {SUBGROUP}; {p['sg_q']} x {p['sg_k']} "
                      f"= {p['sg_q'] * p['sg_k']}"),
                check((*TileShape.READS, *split_reads, "grf"), lambda p: regs(p) <= p["grf"],
                      lambda p: f"register footprint {regs(p)} (a subgroup's Q, S, P, O "
                      f"fragments, row state and {RESERVED_REGS} reserved) exceeds grf "
                      f"{p['grf']} registers per thread"),
            ]
        rules.append(check(TileShape.READS, lambda p: local(p) <= caps.local_mem_bytes,
                           lambda p: f"local memory {local(p)} B exceeds the device's "
                           f"{caps.local_mem_bytes} B"))
        return tuple(rules)

    def _extra_rules(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Rule, ...]:
        """A subclass's own rules, checked after the shared ones."""
        return ()

    # --- build -----------------------------------------------------------------------------
    def defines(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> dict[str, int]:
        """The compile-time parameters of one build (become -DXE2T_<NAME>=value).

        GRF is emitted only for an Intel GPU: 256 becomes the grf_size<256> kernel property,
        which the CPU back end rejects for the whole program.
        """
        p = self.params_from_config(config)
        defines = {
            "D": problem.head_dim, "DTYPE": DTYPE_CODES[problem.dtype], "BQ": p["bq"],
            "BK": p["bk"], "BD": p["bd"], "BV": p["bv"],
            "VTILES": self.dv_columns(config, problem) // p["bv"],
            "SG_Q": p["sg_q"], "SG_K": p["sg_k"], "STAGES": config.stages,
            "POLICY": POLICIES["native" if uses_native_builtins(caps) else "emulated"],
            **kv_variant_defines(problem),
        }
        if p.get("dv_splits", 1) > 1:
            defines["DV_SPLITS"] = p["dv_splits"]
        if caps.is_intel_gpu and caps.registers_per_thread:
            defines["GRF"] = p["grf"]
        return defines

    @staticmethod
    def work_group_items(config: LauncherConfig) -> int:
        """Work-items of one work-group: sg_q * sg_k subgroups of 16."""
        return config.subgroup_layout[0] * config.subgroup_layout[1] * SUBGROUP
