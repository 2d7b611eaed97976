"""Read what Intel's GPU compiler wrote into a zebin: the kernels' ISA and their ``.ze_info``.

A zebin is a 64-bit little-endian ELF (``ocloc compile`` writes one per module and device): one
``.text.<kernel>`` section of raw GPU ISA per kernel, and ``.ze_info``, a YAML document whose
``kernels`` list holds per kernel an ``execution_env`` (``simd_size``, ``grf_count``,
``eu_thread_count``, ``has_dpas``, ``barrier_count``, ``slm_size``, and ``spill_size`` /
``private_size`` only when nonzero).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from xe2tune.errors import Xe2TuneError

_TEXT_PREFIX = ".text."


class ZebinError(Xe2TuneError):
    """Bytes that are not a zebin this reader understands."""


@dataclass(frozen=True)
class ZeKernelInfo:
    """One kernel's ``execution_env``; a field the compiler left out is 0 (or None if unknown)."""

    name: str  # the symbol, e.g. ``__sycl_kernel_xe2t_sdpa_prefill``
    simd_size: int | None
    grf_count: int | None
    eu_thread_count: int | None  # hardware threads per EU at this register count: occupancy
    has_dpas: bool
    spill_size: int
    private_size: int
    slm_size: int
    barrier_count: int


@dataclass(frozen=True)
class Zebin:
    """A zebin's kernels: their ``.ze_info`` entries and ISA (``.text.<name>``), by name."""

    kernels: Mapping[str, ZeKernelInfo]
    isa: Mapping[str, bytes]


def elf_sections(data: bytes) -> dict[str, bytes]:
    """Every named section of a 64-bit little-endian ELF, by name.

    Raises:
        ZebinError: if the bytes are not such an ELF or a section lies outside them.
    """
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ZebinError("not a zebin: no 64-bit little-endian ELF header")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        at = shoff + i * shentsize
        if at + 40 > len(data):
            raise ZebinError("not a zebin: section headers past the end of the file")
        name, _type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, at)
        if offset + size > len(data) and _type != 8:  # SHT_NOBITS occupies no file bytes
            raise ZebinError(f"not a zebin: section {i} past the end of the file")
        headers.append((name, offset, size))
    if shstrndx >= len(headers):
        raise ZebinError("not a zebin: no section-name table")
    names_at = headers[shstrndx][1]

    def name_of(offset: int) -> str:
        end = data.index(b"\0", names_at + offset)
        return data[names_at + offset:end].decode()

    return {name_of(n): data[o:o + s] for n, o, s in headers if n}


def _kernel_info(entry: Mapping[str, Any]) -> ZeKernelInfo:
    env = entry.get("execution_env") or {}
    return ZeKernelInfo(
        name=str(entry["name"]), simd_size=env.get("simd_size"), grf_count=env.get("grf_count"),
        eu_thread_count=env.get("eu_thread_count"), has_dpas=bool(env.get("has_dpas", False)),
        spill_size=int(env.get("spill_size", 0)), private_size=int(env.get("private_size", 0)),
        slm_size=int(env.get("slm_size", 0)), barrier_count=int(env.get("barrier_count", 0)),
    )


def read_zebin(data: bytes) -> Zebin:
    """The kernels of a zebin: their ``.ze_info`` entries and ISA.

    Raises:
        ZebinError: if the bytes are not a zebin, or its ``.ze_info`` is not the YAML
            described above.
    """
    sections = elf_sections(data)
    isa = {name.removeprefix(_TEXT_PREFIX): body for name, body in sections.items()
           if name.startswith(_TEXT_PREFIX)}
    if ".ze_info" not in sections:
        return Zebin({}, isa)  # what ocloc writes for a module without kernels
    import yaml  # with the first zebin read, not with every import of the kernels

    try:
        info = yaml.safe_load(sections[".ze_info"].decode())
        kernels = {k.name: k for k in map(_kernel_info, info.get("kernels") or [])}
    except (yaml.YAMLError, UnicodeDecodeError, AttributeError, KeyError, TypeError,
            ValueError) as exc:
        raise ZebinError(f"unreadable .ze_info: {exc}") from exc
    return Zebin(kernels, isa)
