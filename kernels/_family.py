"""The KernelFamily protocol: what every SDPA kernel family declares to the tuner and harness."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from xe2tune.kernels._config import LauncherConfig
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._problem import ProblemSpec

if TYPE_CHECKING:
    from xe2tune.kernels._rules import ValidGrid


@dataclass(frozen=True)
class KernelLaunch:
    """One kernel submission of a family's launch plan.

    ``kernel`` names an entry of the built program; ``args`` are buffer names ("q", "k", "v",
    "o", or a scratch name declared in ``LaunchPlan.scratch``) or scalars; ``arg_types`` gives
    each arg's kind: "buffer", "int" (int32) or "float" (float32); ``global_size``/``local_size``
    form the nd-range.
    """

    kernel: str
    args: tuple[Any, ...]
    arg_types: tuple[str, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]


@dataclass(frozen=True)
class LaunchPlan:
    """Everything needed to run one config on one problem: the source, defines and launches."""

    source_file: str
    kernel_names: tuple[str, ...]
    defines: Mapping[str, int | str]
    launches: tuple[KernelLaunch, ...]
    scratch: Mapping[str, int]  # name -> bytes of device scratch memory (e.g. split-KV partials)
    # True when the build calls built-ins only an Intel GPU's compiler resolves (the xmx
    # family's native Xe built-ins): the CPU device makes its SPIR-V, then cannot build it.
    needs_intel_gpu: bool = False


@dataclass(frozen=True)
class Baseline:
    """A published launcher config expressed in a family, with where it comes from."""

    label: str  # e.g. "seed 000 SageV1", "SYCL*TLA example", "oneDNN default"
    config: LauncherConfig


class KernelFamily(Protocol):
    """A family of SDPA kernels sharing one source and one parameter space.

    Called from the tuner (availability, space, baselines, default, validate) and the harness
    (plan). All methods are pure functions of their arguments and safe to call from any thread;
    returned objects are new and owned by the caller.
    """

    name: str
    mode: str
    source_file: str  # under kernels/; its hash (with headers) identifies the kernel source
    # True for families written for a matrix engine: searched only on devices that have one
    # (elsewhere they run only when asked for by name).
    needs_matrix_engine: bool

    def unavailable_reason(self, problem: ProblemSpec, caps: DeviceCaps) -> str | None:
        """None if the family can serve this problem on this device at all, else why not.

        Raises:
            Nothing: every failure is a reason string.
        """
        ...

    def baselines(self, problem: ProblemSpec, caps: DeviceCaps) -> tuple[Baseline, ...]:
        """Published configs of this family for the problem (valid or not on this device).

        Raises:
            Nothing.
        """
        ...

    def parameter_space(self, problem: ProblemSpec) -> Mapping[str, Sequence[Any]]:
        """The Cartesian space: parameter name -> candidate values, for this problem.

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        ...

    def config_from_params(self, problem: ProblemSpec, params: Mapping[str, Any]) -> LauncherConfig:
        """Turn one point of :meth:`parameter_space` into a LauncherConfig.

        Raises:
            InvalidConfig: if a parameter is missing or of the wrong kind.
        """
        ...

    def params_from_config(self, config: LauncherConfig) -> dict[str, Any]:
        """Inverse of :meth:`config_from_params`.

        Raises:
            InvalidConfig: if the config has knobs this family does not know.
        """
        ...

    def default_config(self, problem: ProblemSpec, caps: DeviceCaps) -> LauncherConfig:
        """A valid config for this problem on this device, chosen by measurement.

        Raises:
            InvalidProblem: if no config of the family fits the problem on this device.
        """
        ...

    def invalid_reason(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps
    ) -> str | None:
        """None if the config can run, else why not (mirrors the kernel's static_asserts).

        Raises:
            Nothing: every failure is a reason string.
        """
        ...

    def valid_configs(self, problem: ProblemSpec, caps: DeviceCaps) -> Iterator[LauncherConfig]:
        """Every config of the space that :meth:`invalid_reason` accepts.

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        ...

    def valid_grid(self, problem: ProblemSpec, caps: DeviceCaps) -> ValidGrid:
        """The points of :meth:`valid_configs`, in its order, as value positions in
        :meth:`parameter_space`: what a search space is built from without making a config.

        Raises:
            InvalidProblem: if the family cannot serve this problem at all.
        """
        ...

    def plan(
        self, config: LauncherConfig, problem: ProblemSpec, caps: DeviceCaps, *,
        scale: float | None = None,
    ) -> LaunchPlan:
        """The source, compile-time defines and launches for a valid config.

        ``scale`` is the softmax scale (default 1/sqrt(D)); it is a run-time argument, so it
        never changes the build.

        Raises:
            InvalidConfig: if the config is invalid (with the reason).
        """
        ...
