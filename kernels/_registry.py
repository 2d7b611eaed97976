"""Kernel families by name, by mode and by device capability: the one place that knows them."""

from __future__ import annotations

from xe2tune.errors import InvalidConfig, InvalidProblem
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._device_caps import DeviceCaps
from xe2tune.kernels._family import KernelFamily
from xe2tune.kernels._family_union import FamilyUnion
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._problem import ProblemSpec
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_family import uses_native_builtins
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily

# In order of preference: where several families serve a problem, the first one's default is
# the search's default and the one `sdpa()`/`bench` use when no family is named.
_FAMILIES: dict[str, KernelFamily] = {
    f.name: f for f in (XmxPrefillFamily(), XmxDecodeFamily(), PrefillFamily(), DecodeFamily())
}


def family_names() -> tuple[str, ...]:
    """Names of every registered family."""
    return tuple(_FAMILIES)


def get_family(name: str) -> KernelFamily:
    """The family called ``name``.

    Raises:
        InvalidConfig: if no family has that name (the message lists those that exist).
    """
    try:
        return _FAMILIES[name]
    except KeyError:
        raise InvalidConfig(
            f"unknown kernel family {name!r}; accepted: {', '.join(_FAMILIES)}"
        ) from None


def family_for_mode(mode: str) -> KernelFamily:
    """The vector-lane family serving ``mode`` ("prefill" or "decode"): runs on every device.

    Raises:
        InvalidConfig: if no family serves that mode.
    """
    for family in _FAMILIES.values():
        if family.mode == mode and not family.needs_matrix_engine:
            return family
    modes = ", ".join(f.mode for f in _FAMILIES.values())
    raise InvalidConfig(f"no kernel family serves mode {mode!r}; accepted: {modes}")


def families_for(problem: ProblemSpec, caps: DeviceCaps) -> tuple[KernelFamily, ...]:
    """The families searched for a problem on a device, in order of preference.

    Where their native Xe built-ins run (an Intel GPU with 8 x 16 x 16 DPAS), the matrix-engine
    families that serve the problem are searched alone: the vector-lane families are the CPU
    design, whose tiles spill on Xe2 (IGC 2.40 for bmg: 3-20 KB per prefill kernel in a dry
    run's sample). They serve what the matrix engine does not (fp32) and every other device,
    where the matrix-engine families only emulate the engine (a correctness vehicle, slower
    than the vector-lane kernels by construction). Either kind still runs when named.
    """
    available = [f for f in _FAMILIES.values() if f.unavailable_reason(problem, caps) is None]
    matrix = tuple(f for f in available if f.needs_matrix_engine)
    if matrix and uses_native_builtins(caps):
        return matrix
    return tuple(f for f in available if not f.needs_matrix_engine)


def search_family(problem: ProblemSpec, caps: DeviceCaps) -> KernelFamily:
    """What a search of ``problem`` on this device explores: one family, or their union.

    Raises:
        InvalidProblem: if no family can serve the problem on this device (with each reason).
    """
    families = families_for(problem, caps)
    if not families:
        reasons = "; ".join(
            f"{f.name}: {f.unavailable_reason(problem, caps) or 'needs a matrix engine'}"
            for f in _FAMILIES.values() if f.mode == problem.mode)
        raise InvalidProblem(f"no kernel family serves {problem.key()} on {caps.name} ({reasons})")
    return families[0] if len(families) == 1 else FamilyUnion(families, problem)


def family_for(problem: ProblemSpec, caps: DeviceCaps, name: str | None = None) -> KernelFamily:
    """The one family that runs ``problem`` here: ``name`` if given, else the preferred one.

    Raises:
        InvalidConfig: for an unknown family name.
        InvalidProblem: if the named family (or every family) cannot serve the problem here.
    """
    if name is None:
        family = search_family(problem, caps)
        return getattr(family, "members", (family,))[0]
    family = get_family(name)
    reason = family.unavailable_reason(problem, caps)
    if reason is not None:
        raise InvalidProblem(reason)
    return family
