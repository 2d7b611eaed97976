"""LauncherConfig: one point of a kernel family's space, in the seed's launcher vocabulary."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from xe2tune.errors import InvalidConfig

Knob = int | str | bool


@dataclass(frozen=True)
class LauncherConfig:
    """Tile shapes and pipeline depth of one kernel instantiation.

    ``shape_qk`` = (BQ, BK, BD): Q tile rows, K block rows, head-dim slice of the QK product.
    ``shape_pv`` = (BQ, BV, BK): Q tile rows, V/O split width, key reduction.
    ``shape_out`` = (BQ, Dv): the output tile; ``vtiles`` = Dv / BV splits of the PV product.
    ``subgroup_layout`` = subgroups along (Q, K) in a work-group; ``stages`` = K blocks
    prefetched ahead. ``knobs`` holds each family's extra compile-time parameters as a sorted
    tuple of (name, value), so equal configs hash equally and ``str`` is stable across runs.
    """

    shape_qk: tuple[int, int, int]
    shape_pv: tuple[int, int, int]
    shape_out: tuple[int, int]
    subgroup_layout: tuple[int, int]
    stages: int
    subgroup_size: int
    knobs: tuple[tuple[str, Knob], ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape_qk", tuple(int(v) for v in self.shape_qk))
        object.__setattr__(self, "shape_pv", tuple(int(v) for v in self.shape_pv))
        object.__setattr__(self, "shape_out", tuple(int(v) for v in self.shape_out))
        object.__setattr__(self, "subgroup_layout", tuple(int(v) for v in self.subgroup_layout))
        knobs = dict(self.knobs)
        if len(knobs) != len(self.knobs):
            raise InvalidConfig("duplicate knob names")
        object.__setattr__(self, "knobs", tuple(sorted(knobs.items())))
        if len(self.shape_qk) != 3 or len(self.shape_pv) != 3 or len(self.shape_out) != 2:
            raise InvalidConfig("shape_qk and shape_pv take 3 values, shape_out 2")
        if len(self.subgroup_layout) != 2:
            raise InvalidConfig("subgroup_layout takes 2 values (along Q, along K)")

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
    def from_dict(cls, data: dict[str, Any]) -> LauncherConfig:
        """Parse the JSON form; raises InvalidConfig naming what is missing or malformed."""
        if not isinstance(data, dict):
            raise InvalidConfig("a config must be a JSON object")
        required = ("shape_qk", "shape_pv", "shape_out", "subgroup_layout", "stages",
                    "subgroup_size")
        missing = [k for k in required if k not in data]
        if missing:
            raise InvalidConfig(f"config is missing {', '.join(missing)}")
        allowed = set(required) | {"vtiles", "knobs"}
        unknown = set(data) - allowed
        if unknown:
            raise InvalidConfig(
                f"unknown config fields: {', '.join(sorted(unknown))}; accepted: "
                + ", ".join(sorted(allowed))
            )
        try:
            config = cls(
                shape_qk=tuple(data["shape_qk"]),
                shape_pv=tuple(data["shape_pv"]),
                shape_out=tuple(data["shape_out"]),
                subgroup_layout=tuple(data["subgroup_layout"]),
                stages=int(data["stages"]),
                subgroup_size=int(data["subgroup_size"]),
                knobs=tuple(dict(data.get("knobs", {})).items()),
            )
        except (TypeError, ValueError) as exc:
            raise InvalidConfig(f"malformed config: {exc}") from exc
        if "vtiles" in data and int(data["vtiles"]) != config.vtiles:
            raise InvalidConfig(
                f"vtiles {data['vtiles']} disagrees with shape_out/shape_pv ({config.vtiles})"
            )
        return config

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def config_hash(self) -> str:
        """sha256 of the stable string form (first 16 hex digits)."""
        return hashlib.sha256(str(self).encode()).hexdigest()[:16]
