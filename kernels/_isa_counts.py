"""Static instruction counts of one kernel, read from ``iga64 -d`` (Intel's ISA disassembler).

iga64 prints one instruction per line (``[(pred)] mnemonic (exec|mask) operands {swsb}``) and
annotates every ``send`` with its decoded message after ``//``: ``wr:1+0, rd:4;
load_block2d.ugm.d16v.a64``. What the counts rest on (read in Xe2 ISA of tiny probe kernels,
tests/data/isa_probe.cpp):

- a 2D block load is ``load_block2d.ugm.<dN>[v|t]``: ``v`` the VNNI transform (B operand),
  ``t`` the transpose; with a ``null`` destination it is a prefetch; stores are
  ``store_block2d``;
- spills and fills are ugm messages through the scratch surface (``.ss[a0.2]``), and
  IGC's prologue loads the thread payload through binding-table slot 255 (``.bti[255]``):
  neither is counted as a global load or store;
- a work-group barrier is a ``signal barrier`` gateway message followed by ``sync.bar``, the
  wait; ``sync.bar`` is what is counted.

Counts are static (an instruction in a loop counts once); the padding IGC appends after the
last end-of-thread send is not counted. :func:`count_dpas_loop` counts the innermost loop that
holds every ``dpas`` of a kernel: in an attention kernel, the K loop, which is what its
throughput rests on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_PREDICATE = re.compile(r"^\((?:[^)]*)\)\s*")
_BLOCK2D_TYPE = re.compile(r"^d(?P<bits>\d+)(?P<form>[vt]?)$")
_FORMS = {"": "plain", "v": "vnni", "t": "transposed"}
_LABEL = re.compile(r"^(L\d+):")
_BRANCH = re.compile(r"\b(?:jmpi|goto|while|brc|brd)\b.*?\b(L\d+)\b")


@dataclass(frozen=True)
class IsaCounts:
    """What one kernel's ISA holds, by kind of instruction (static counts)."""

    instructions: int
    dpas: int
    block2d_loads: int
    block2d_loads_by_form: Mapping[str, int]  # "plain" / "vnni" / "transposed" -> count
    block2d_loads_by_element: Mapping[str, int]  # element type as iga names it ("d16") -> count
    block2d_stores: int
    block2d_prefetches: int
    global_loads: int  # other ugm loads (load, load_block, ...), prefetches included
    global_stores: int
    global_atomics: int
    slm_messages: int  # shared local memory loads, stores and atomics
    scratch_messages: int  # spills and fills (and private arrays that live in scratch)
    barriers: int
    fences: int
    other_sends: int  # payload loads, gateway messages other than barriers, ...

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {**vars(self), "block2d_loads_by_form": dict(self.block2d_loads_by_form),
                "block2d_loads_by_element": dict(self.block2d_loads_by_element)}


def _mnemonic_and_rest(line: str) -> tuple[str, str] | None:
    text = line.strip()
    if not text or text.startswith("//") or text.endswith(":"):
        return None  # blank, comment or label
    text = _PREDICATE.sub("", text)
    mnemonic, _, rest = text.partition(" ")
    return mnemonic, rest.strip()


def _instructions(disassembly: str) -> list[tuple[str, str]]:
    parsed = [p for p in map(_mnemonic_and_rest, disassembly.splitlines()) if p is not None]
    last_eot = max((i for i, (_, rest) in enumerate(parsed) if "EOT" in rest), default=None)
    return parsed if last_eot is None else parsed[:last_eot + 1]


def _send_kind(mnemonic: str, rest: str, counts: Counter[str], forms: Counter[str],
               elements: Counter[str]) -> None:
    message = rest.partition("//")[2].partition(";")[2].strip()
    sfid = mnemonic.partition(".")[2]
    op, *parts = message.split(".")
    null_destination = rest.split()[1:2] == ["null"]  # after the "(exec|mask)" operand
    if op == "load_block2d":
        if null_destination:
            counts["block2d_prefetches"] += 1
            return
        counts["block2d_loads"] += 1
        element = next((m for p in parts if (m := _BLOCK2D_TYPE.match(p))), None)
        if element is not None:
            forms[_FORMS[element["form"]]] += 1
            elements[f"d{element['bits']}"] += 1
    elif op == "store_block2d":
        counts["block2d_stores"] += 1
    elif op.startswith("fence"):
        counts["fences"] += 1
    elif ".ss[" in message or "scratch" in message:
        counts["scratch_messages"] += 1
    elif sfid == "slm":
        counts["slm_messages"] += 1
    elif sfid == "ugm" and ".bti[255]" not in message and op.startswith(("load", "store",
                                                                          "atomic")):
        kind = "loads" if op.startswith("load") else "stores" if op.startswith("store") \
            else "atomics"
        counts[f"global_{kind}"] += 1
    else:
        counts["other_sends"] += 1


def count_isa(disassembly: str) -> IsaCounts:
    """Count one kernel's instructions by kind from its ``iga64 -d`` listing."""
    counts: Counter[str] = Counter()
    forms: Counter[str] = Counter()
    elements: Counter[str] = Counter()
    instructions = _instructions(disassembly)
    for mnemonic, rest in instructions:
        if mnemonic.startswith("dpas"):
            counts["dpas"] += 1
        elif mnemonic == "sync.bar":
            counts["barriers"] += 1
        elif mnemonic.startswith("send") and "end of thread" not in rest \
                and "signal barrier" not in rest:
            _send_kind(mnemonic, rest, counts, forms, elements)
    return IsaCounts(
        instructions=len(instructions), dpas=counts["dpas"],
        block2d_loads=counts["block2d_loads"], block2d_loads_by_form=dict(sorted(forms.items())),
        block2d_loads_by_element=dict(sorted(elements.items())),
        block2d_stores=counts["block2d_stores"], block2d_prefetches=counts["block2d_prefetches"],
        global_loads=counts["global_loads"], global_stores=counts["global_stores"],
        global_atomics=counts["global_atomics"], slm_messages=counts["slm_messages"],
        scratch_messages=counts["scratch_messages"], barriers=counts["barriers"],
        fences=counts["fences"], other_sends=counts["other_sends"],
    )


def count_dpas_loop(disassembly: str) -> IsaCounts | None:
    """Counts of the innermost loop that holds every ``dpas`` (from its label to the backward
    branch that closes it), or None when the kernel has no dpas or they are in no one loop."""
    lines = disassembly.splitlines()
    dpas = [i for i, line in enumerate(lines)
            if (p := _mnemonic_and_rest(line)) is not None and p[0].startswith("dpas")]
    if not dpas:
        return None
    labels = {m[1]: i for i, line in enumerate(lines) if (m := _LABEL.match(line.strip()))}
    loops = [(labels[m[1]], i) for i, line in enumerate(lines)
             if (m := _BRANCH.search(line)) and m[1] in labels and labels[m[1]] < i]
    around = [(a, b) for a, b in loops if a <= dpas[0] and dpas[-1] <= b]
    if not around:
        return None
    first, last = min(around, key=lambda loop: loop[1] - loop[0])
    return count_isa("\n".join(lines[first:last + 1]))
