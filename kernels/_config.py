"""LauncherConfig: one point of a kernel family's space, in the seed's launcher vocabulary."""

from __future__ import annotations

import functools
import hashlib
import json
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xe2tune.errors import InvalidConfig

Knob = int | str | bool

# Hard caps every config obeys, whatever its family: no kernel here tiles beyond them, and they
# keep configs from the API or a database from allocating or compiling anything huge. A family's
# ``invalid_reason`` then checks its own space (e.g. rows_per_item among 1..12).
MAX_EXTENT = 4096  # tile extents, the output tile's Dv and subgroups per work-group
MAX_STAGES = 16
MAX_SUBGROUP_SIZE = 128
MAX_KNOBS = 32
MAX_NAME = 64  # family and knob names, string knob values
MAX_KNOB_INT = 2**31 - 1  # a C++ int define
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class LauncherConfig:
    """Tile shapes and pipeline depth of one kernel instantiation.

    ``shape_qk`` = (BQ, BK, BD): Q tile rows, K block rows, head-dim slice of the QK product.
    ``shape_pv`` = (BQ, BV, BK): Q tile rows, V/O split width, key reduction.
    ``shape_out`` = (BQ, Dv): the output tile; ``vtiles`` = Dv / BV splits of the PV product.
    ``subgroup_layout`` = subgroups along (Q, K) in a work-group; ``stages`` = K blocks
    prefetched ahead. ``knobs`` holds each family's extra compile-time parameters as a sorted
    tuple of (name, value), so equal configs hash equally and ``str`` is stable across runs.
    ``family`` names the kernel family the shapes belong to: the same shapes in two families are
    two different kernels, so the family is part of the string form and the hash.

    Construction checks every field's type and hard bounds (extents 1..MAX_EXTENT, stages
    0..MAX_STAGES, knobs of bool, C++ int or short string; no bool, float, NaN or Infinity for
    an int) and raises ``InvalidConfig`` naming the field and what is accepted; whether the
    config fits its family's space, the problem and the device is the family's
    ``invalid_reason``.
    """

    family: str
    shape_qk: tuple[int, int, int]
    shape_pv: tuple[int, int, int]
    shape_out: tuple[int, int]
    subgroup_layout: tuple[int, int]
    stages: int
    subgroup_size: int
    knobs: tuple[tuple[str, Knob], ...] = field(default=())

    def __post_init__(self) -> None:
        _check_name("family", self.family)
        for name, size in (("shape_qk", 3), ("shape_pv", 3), ("shape_out", 2),
                           ("subgroup_layout", 2)):
            object.__setattr__(self, name, _extents(name, getattr(self, name), size))
        object.__setattr__(self, "stages", _integer("stages", self.stages, 0, MAX_STAGES))
        object.__setattr__(self, "subgroup_size",
                           _integer("subgroup_size", self.subgroup_size, 1, MAX_SUBGROUP_SIZE))
        given = _sequence("knobs", self.knobs, None)
        if len(given) > MAX_KNOBS:
            raise InvalidConfig(f"config has {len(given)} knobs; accepted: at most {MAX_KNOBS}")
        pairs = [_knob_pair(pair) for pair in given]
        knobs = dict(pairs)
        if len(knobs) != len(pairs):
            raise InvalidConfig("duplicate knob names")
        object.__setattr__(self, "knobs", tuple(sorted(knobs.items())))

    @property
    def bq(self) -> int:
        return self.shape_qk[0]

    @property
    def bk(self) -> int:
        return self.shape_qk[1]

    @property
    def bd(self) -> int:
        return self.shape_qk[2]

    @property
    def bv(self) -> int:
        return self.shape_pv[1]

    @property
    def vtiles(self) -> int:
        """Dv / BV: how many BV-wide splits the PV product walks per K block."""
        return self.shape_out[1] // self.shape_pv[1]

    def knob(self, name: str, default: Knob | None = None) -> Knob | None:
        """The value of an extra knob."""
        return dict(self.knobs).get(name, default)

    def to_dict(self) -> dict[str, Any]:
        """JSON form; ``vtiles`` is included for readers and ignored on the way back."""
        return {
            "family": self.family,
            "shape_qk": list(self.shape_qk),
            "shape_pv": list(self.shape_pv),
            "shape_out": list(self.shape_out),
            "subgroup_layout": list(self.subgroup_layout),
            "stages": self.stages,
            "vtiles": self.vtiles,
            "subgroup_size": self.subgroup_size,
            "knobs": dict(self.knobs),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, family: str | None = None) -> LauncherConfig:
        """Parse the JSON form.

        ``family`` is used when the JSON names none (a config written by hand for one problem,
        whose mode implies the family); a family in the JSON always wins.

        Raises:
            InvalidConfig: naming the field that is missing, unknown or malformed.
        """
        if not isinstance(data, dict):
            raise InvalidConfig("a config must be a JSON object")
        if "family" not in data and family is not None:
            data = {**data, "family": family}
        required = ("family", "shape_qk", "shape_pv", "shape_out", "subgroup_layout", "stages",
                    "subgroup_size")
        missing = [k for k in required if k not in data]
        if missing:
            raise InvalidConfig(f"config is missing {', '.join(missing)}")
        allowed = set(required) | {"vtiles", "knobs"}
        unknown = set(data) - allowed
        if unknown:
            shown = ", ".join(sorted(str(k)[:MAX_NAME] for k in unknown)[:5])
            raise InvalidConfig(
                f"unknown config fields: {shown}; accepted: " + ", ".join(sorted(allowed))
            )
        knobs = data.get("knobs", {})
        if not isinstance(knobs, dict):
            raise InvalidConfig("config field knobs must be a JSON object of name: value")
        config = cls(**{k: data[k] for k in required}, knobs=tuple(knobs.items()))
        if "vtiles" in data and _integer("vtiles", data["vtiles"], 1, MAX_EXTENT) != config.vtiles:
            raise InvalidConfig(
                f"vtiles {data['vtiles']} disagrees with shape_out/shape_pv ({config.vtiles})"
            )
        return config

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def config_hash(self) -> str:
        """sha256 of the stable string form (first 16 hex digits)."""
        return hashlib.sha256(str(self).encode()).hexdigest()[:16]


def _shown(value: Any) -> str:
    """A value for an error message, cut short: messages are one line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _integer(name: str, value: Any, low: int, high: int) -> int:
    """``value`` as an int in low..high; bools, floats (NaN, Infinity) and strings are refused."""
    # type() first: a search validates every config of its space, and the ABC check is slow.
    integral = type(value) is int or (not isinstance(value, bool)
                                      and isinstance(value, numbers.Integral))
    if not integral or not low <= int(value) <= high:
        raise InvalidConfig(
            f"config field {name} must be an integer in {low}..{high}, got {_shown(value)}"
        )
    return int(value)


def _extents(name: str, values: Any, size: int) -> tuple[int, ...]:
    """``size`` ints in 1..MAX_EXTENT, as a tuple."""
    if type(values) is tuple and len(values) == size \
            and all(type(v) is int and 0 < v <= MAX_EXTENT for v in values):
        return values  # the common case, without building a message per value
    return tuple(_integer(f"{name}[{i}]", v, 1, MAX_EXTENT)
                 for i, v in enumerate(_sequence(name, values, size)))


def _sequence(name: str, value: Any, size: int | None) -> Sequence[Any]:
    """A list or tuple of ``size`` items (any size when None)."""
    if not isinstance(value, (list, tuple)) or (size is not None and len(value) != size):
        count = "a list" if size is None else f"a list of {size} integers"
        raise InvalidConfig(f"config field {name} must be {count}, got {_shown(value)}")
    return value


@functools.lru_cache(maxsize=1024)
def _is_name(value: str) -> bool:
    return len(value) <= MAX_NAME and _NAME.fullmatch(value) is not None


def _check_name(what: str, value: Any) -> None:
    if not isinstance(value, str) or not _is_name(value):
        raise InvalidConfig(
            f"config field {what} must be a name of letters, digits, _ . or - (at most {MAX_NAME} "
            f"characters, e.g. sdpa_prefill), got {_shown(value)}"
        )


def _knob_pair(pair: Any) -> tuple[str, Knob]:
    """One (name, value) knob: a bool, an int within a C++ int, or a short string."""
    if not isinstance(pair, (list, tuple)) or len(pair) != 2:
        raise InvalidConfig(f"a knob must be a (name, value) pair, got {_shown(pair)}")
    name, value = pair
    _check_name("knob name", name)
    if isinstance(value, bool) or (type(value) is int and abs(value) <= MAX_KNOB_INT):
        return name, value
    if isinstance(value, numbers.Integral):
        return name, _integer(f"knobs.{name}", value, -MAX_KNOB_INT, MAX_KNOB_INT)
    if isinstance(value, str) and len(value) <= MAX_NAME:
        return name, value
    raise InvalidConfig(
        f"config field knobs.{name} must be a boolean, an integer or a string of at most "
        f"{MAX_NAME} characters, got {_shown(value)}"
    )
