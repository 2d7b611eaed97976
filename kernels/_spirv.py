"""A summary of one SPIR-V module, read straight from its binary word stream (no dependency).

The format: a 5-word header (magic 0x07230203, version, generator, id bound, schema), then
instructions whose first word is ``(word_count << 16) | opcode``; literal strings are nul-terminated
UTF-8 packed little-endian into words. What is summarized is what a matrix-engine kernel's tuning
depends on: multiply-accumulates (``OpCooperativeMatrixMulAddKHR``, or a call of the imported
``intel_sub_group_*_matrix_mad_k*`` built-ins that the xmx family's native build uses; each is one
DPAS), the required subgroup size,
the register mode (``grf_size<256>`` becomes ``OpDecorate <kernel function> UserSemantic
"num-thread-per-eu 4"`` in the modules the SYCL runtime compiler writes) and static local memory
(``OpVariable``s in the Workgroup storage class; local accessors sized at launch are not in it).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from xe2tune.errors import Xe2TuneError

MAGIC = 0x07230203
SYCL_KERNEL_PREFIX = "__sycl_kernel_"  # the SYCL front end's name for a free-function kernel
DOUBLE_GRF, DEFAULT_GRF = "256 (doubleGRF)", "default (128)"
_DOUBLE_GRF_SEMANTIC = "num-thread-per-eu 4"
# cl_intel_subgroup_matrix_multiply_accumulate's built-ins (mangled names contain this).
_MATRIX_MAD_BUILTIN = "_matrix_mad_k"

# Opcodes (SPIR-V spec, section 3.52) and the enumerants used here.
OP_NAME, OP_EXTENSION, OP_EXT_INST, OP_MEMORY_MODEL, OP_ENTRY_POINT = 5, 10, 12, 14, 15
OP_EXECUTION_MODE, OP_CAPABILITY, OP_EXECUTION_MODE_ID = 16, 17, 331
OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_MATRIX = 20, 21, 22, 23, 24
OP_TYPE_ARRAY, OP_TYPE_STRUCT, OP_TYPE_POINTER = 28, 30, 32
OP_CONSTANT, OP_CONSTANT_COMPOSITE, OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_OP = 43, 44, 50, 52
OP_FUNCTION, OP_FUNCTION_END, OP_FUNCTION_CALL, OP_VARIABLE = 54, 56, 57, 59
OP_DECORATE, OP_DECORATE_STRING = 71, 5632
OP_COOPERATIVE_MATRIX_MUL_ADD_KHR = 4459
EXECUTION_MODE_SUBGROUP_SIZE = 35
STORAGE_CLASS_WORKGROUP = 4
DECORATION_CPACKED, DECORATION_USER_SEMANTIC = 10, 5635
ADDRESSING_PHYSICAL32 = 1

# Which operands of a function-body instruction are literals rather than ids. Only ids decide
# which Workgroup variables a function uses, so a literal (an alignment, an index) never counts
# as a use. Tails: every operand from this index on is a literal or a mask.
_LITERALS_FROM = {
    8: 1,  # OpLine: line, column
    61: 3, 62: 2, 63: 2, 64: 3,  # OpLoad, OpStore, OpCopyMemory(Sized): memory operands
    79: 4, 81: 3, 82: 4,  # OpVectorShuffle, OpCompositeExtract/Insert: indices
    246: 0, 247: 0, 250: 3, 251: 1,  # merges, OpBranchConditional weights, OpSwitch cases
    256: 1, 257: 1,  # OpLifetimeStart/Stop: size
    4457: 5, 4458: 4,  # OpCooperativeMatrixLoad/StoreKHR: memory operands after the stride
    4459: 5,  # OpCooperativeMatrixMulAddKHR: cooperative-matrix operands
}
# One literal in the middle: OpExtInst's instruction number, OpSpecConstantOp's opcode,
# OpFunction's control, OpVariable's storage class, the GroupOperation of group reductions.
_LITERAL_AT = {OP_EXT_INST: 3, OP_SPEC_CONSTANT_OP: 2, OP_FUNCTION: 2, OP_VARIABLE: 2}
_LITERAL_AT.update(dict.fromkeys([*range(264, 272), *range(349, 363)], 3))

# Capability names (SPIRV-Headers unified1) of the ones the SYCL runtime compiler emits.
_CAPABILITIES = {
    4: "Addresses", 5: "Linkage", 6: "Kernel", 7: "Vector16", 8: "Float16Buffer", 9: "Float16",
    10: "Float64", 11: "Int64", 12: "Int64Atomics", 18: "Groups", 22: "Int16",
    38: "GenericPointer", 39: "Int8", 58: "SubgroupDispatch", 61: "GroupNonUniform",
    62: "GroupNonUniformVote", 63: "GroupNonUniformArithmetic", 64: "GroupNonUniformBallot",
    65: "GroupNonUniformShuffle", 66: "GroupNonUniformShuffleRelative",
    5568: "SubgroupShuffleINTEL", 5569: "SubgroupBufferBlockIOINTEL",
    5584: "IntegerFunctions2INTEL", 5603: "FunctionPointersINTEL", 5617: "VectorComputeINTEL",
    5619: "VectorAnyINTEL", 5629: "ExpectAssumeKHR", 5821: "FunctionFloatControlINTEL",
    5837: "FPFastMathModeINTEL", 5892: "KernelAttributesINTEL", 6022: "CooperativeMatrixKHR",
    6033: "AtomicFloat32AddEXT", 6115: "BFloat16ConversionINTEL",
    6220: "SubgroupBufferPrefetchINTEL", 6228: "Subgroup2DBlockIOINTEL",
    6236: "SubgroupMatrixMultiplyAccumulateINTEL", 6441: "CacheControlsINTEL",
}


class SpirvError(Xe2TuneError):
    """Bytes that are not a well-formed SPIR-V module, or a type this summary cannot size."""


@dataclass(frozen=True)
class KernelSpirv:
    """One entry point of a module: what its launch on a GPU depends on.

    ``matrix_mads`` and ``local_memory_bytes`` count what the kernel's function and every
    function it can call contain (static counts: a multiply-add in a loop counts once).
    """

    name: str  # the SPIR-V entry point name
    function_id: int
    subgroup_size: int | None  # required subgroup size; None when the kernel leaves it open
    register_mode: str  # DOUBLE_GRF, DEFAULT_GRF, or the UserSemantic text when another
    matrix_mads: int
    local_memory_bytes: int

    @property
    def kernel(self) -> str:
        """The kernel's source name (the entry point name without the SYCL front end's prefix)."""
        return self.name.removeprefix(SYCL_KERNEL_PREFIX)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with the source name as ``kernel``."""
        return {"kernel": self.kernel, "entry_point": self.name,
                "subgroup_size": self.subgroup_size, "register_mode": self.register_mode,
                "matrix_mads": self.matrix_mads, "local_memory_bytes": self.local_memory_bytes}


@dataclass(frozen=True)
class SpirvSummary:
    """What one SPIR-V module holds; ``local_memory_bytes`` sums all its Workgroup variables."""

    version: tuple[int, int]
    entry_points: Mapping[str, int]  # name -> function id
    kernels: tuple[KernelSpirv, ...]
    matrix_mads: int
    matrix_mads_by_function: Mapping[str, int]  # function name (or %id) -> count, nonzero only
    extensions: tuple[str, ...]
    capabilities: tuple[str, ...]
    local_memory_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "version": f"{self.version[0]}.{self.version[1]}",
            "kernels": [k.to_dict() for k in self.kernels], "matrix_mads": self.matrix_mads,
            "matrix_mads_by_function": dict(self.matrix_mads_by_function),
            "extensions": list(self.extensions), "capabilities": list(self.capabilities),
            "local_memory_bytes": self.local_memory_bytes,
        }


@dataclass(frozen=True)
class _Instruction:
    opcode: int
    operands: tuple[int, ...]
    function: int | None  # id of the function whose body holds it


def _words(data: bytes) -> tuple[int, ...]:
    if len(data) < 20 or len(data) % 4:
        raise SpirvError(f"not a SPIR-V module: {len(data)} bytes (a whole number of 4-byte "
                         "words, at least the 5-word header, is expected)")
    for order in "<>":
        words = struct.unpack(f"{order}{len(data) // 4}I", data)
        if words[0] == MAGIC:
            return words
    raise SpirvError(f"not a SPIR-V module: magic {data[:4].hex()} (expected 0x{MAGIC:08x})")


def _instructions(words: tuple[int, ...]) -> Iterator[_Instruction]:
    i, function = 5, None
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise SpirvError(f"truncated SPIR-V: opcode {opcode} at word {i} claims {count} words "
                             f"of the {len(words) - i} left")
        operands = words[i + 1:i + count]
        if opcode == OP_FUNCTION:
            function = operands[1]
        yield _Instruction(opcode, operands, function)
        if opcode == OP_FUNCTION_END:
            function = None
        i += count


def _string(words: tuple[int, ...]) -> tuple[str, int]:
    """A literal string at the start of ``words`` and how many words it takes."""
    raw = struct.pack(f"<{len(words)}I", *words)
    end = raw.find(b"\0")
    if end < 0:
        raise SpirvError("unterminated literal string in SPIR-V")
    return raw[:end].decode("utf-8", errors="replace"), end // 4 + 1


def _id_operands(inst: _Instruction) -> tuple[int, ...]:
    ops = inst.operands
    at = _LITERAL_AT.get(inst.opcode)
    if at is not None:
        return ops[:at] + ops[at + 1:]
    return ops[:_LITERALS_FROM.get(inst.opcode, len(ops))]


class _Module:
    """The parsed instructions, indexed the ways the summary reads them."""

    def __init__(self, words: tuple[int, ...]) -> None:
        self.version = ((words[1] >> 16) & 0xFF, (words[1] >> 8) & 0xFF)
        self.insts = list(_instructions(words))
        self.types = {i.operands[0]: i for i in self.insts if 19 <= i.opcode <= 39}
        self.constants = {i.operands[1]: i.operands[2:] for i in self.insts
                          if i.opcode in (OP_CONSTANT, OP_SPEC_CONSTANT)}
        self.names = {i.operands[0]: _string(i.operands[1:])[0] for i in self.insts
                      if i.opcode == OP_NAME}
        self.packed = {i.operands[0] for i in self.insts
                       if i.opcode == OP_DECORATE and i.operands[1] == DECORATION_CPACKED}
        self.pointer_bytes = next(
            (4 if i.operands[0] == ADDRESSING_PHYSICAL32 else 8 for i in self.insts
             if i.opcode == OP_MEMORY_MODEL), 8)

    def constant(self, const_id: int) -> int:
        value = self.constants.get(const_id)
        if value is None:
            raise SpirvError(f"%{const_id} is not an integer constant")
        return sum(w << (32 * k) for k, w in enumerate(value))  # low-order word first

    def size_align(self, type_id: int) -> tuple[int, int]:
        """Bytes and alignment of a type, laid out as OpenCL C lays out its types."""
        t = self.types.get(type_id)
        ops = t.operands if t else ()
        if t is None or t.opcode not in (OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR,
                                         OP_TYPE_MATRIX, OP_TYPE_ARRAY, OP_TYPE_STRUCT,
                                         OP_TYPE_POINTER):
            kind = f"opcode {t.opcode}" if t else "not a type"
            raise SpirvError(f"cannot size SPIR-V type %{type_id} ({kind})")
        if t.opcode == OP_TYPE_BOOL:
            return 1, 1
        if t.opcode in (OP_TYPE_INT, OP_TYPE_FLOAT):
            return ops[1] // 8, ops[1] // 8
        if t.opcode == OP_TYPE_POINTER:
            return self.pointer_bytes, self.pointer_bytes
        if t.opcode in (OP_TYPE_VECTOR, OP_TYPE_MATRIX):
            size, _ = self.size_align(ops[1])
            total = size * (4 if ops[2] == 3 else ops[2])  # a 3-vector takes a 4-vector's room
            return total, total
        if t.opcode == OP_TYPE_ARRAY:
            size, align = self.size_align(ops[1])
            return size * self.constant(ops[2]), align
        offset, struct_align = 0, 1
        for member in ops[1:]:
            size, align = self.size_align(member)
            align = 1 if type_id in self.packed else align
            offset = -(-offset // align) * align + size
            struct_align = max(struct_align, align)
        return -(-offset // struct_align) * struct_align, struct_align

    def workgroup_variables(self) -> dict[int, int]:
        """Workgroup variable id -> bytes of the type it points to."""
        out = {}
        for i in self.insts:
            if i.opcode == OP_VARIABLE and i.operands[2] == STORAGE_CLASS_WORKGROUP:
                pointer = self.types.get(i.operands[0])
                if pointer is None or pointer.opcode != OP_TYPE_POINTER:
                    raise SpirvError(f"Workgroup variable %{i.operands[1]} has no pointer type")
                out[i.operands[1]] = self.size_align(pointer.operands[2])[0]
        return out

    def variable_aliases(self, variables: Mapping[int, int]) -> dict[int, int]:
        """Every id that stands for a Workgroup variable -> that variable.

        Module-level constant expressions (an ``OpSpecConstantOp`` address-space cast of the
        variable, say) are how functions may name it; they precede their uses, so one pass does.
        """
        alias = {v: v for v in variables}
        for i in self.insts:
            if i.function is None and i.opcode in (OP_SPEC_CONSTANT_OP, OP_CONSTANT_COMPOSITE):
                used = [alias[x] for x in _id_operands(i)[2:] if x in alias]
                if used:
                    alias[i.operands[1]] = used[0]
        return alias


def _reachable(calls: Mapping[int, set[int]], root: int) -> set[int]:
    seen, pending = {root}, [root]
    while pending:
        for callee in calls.get(pending.pop(), ()):
            if callee not in seen:
                seen.add(callee)
                pending.append(callee)
    return seen


def parse_spirv(data: bytes) -> SpirvSummary:
    """Summarize a SPIR-V module.

    Raises:
        SpirvError: if ``data`` is not a well-formed module, or a Workgroup variable has a type
            that has no size (an opaque or runtime-sized type).
    """
    m = _Module(_words(data))
    entries: dict[str, int] = {}
    subgroup: dict[int, int] = {}
    semantics: dict[int, str] = {}
    extensions: list[str] = []
    capabilities: list[str] = []
    for i in m.insts:
        ops = i.operands
        if i.opcode == OP_ENTRY_POINT:
            entries[_string(ops[2:])[0]] = ops[1]
        elif i.opcode == OP_EXECUTION_MODE and ops[1] == EXECUTION_MODE_SUBGROUP_SIZE:
            subgroup[ops[0]] = ops[2]
        elif i.opcode == OP_EXECUTION_MODE_ID and ops[1] == EXECUTION_MODE_SUBGROUP_SIZE:
            subgroup[ops[0]] = m.constant(ops[2])
        elif (i.opcode in (OP_DECORATE, OP_DECORATE_STRING)
              and ops[1] == DECORATION_USER_SEMANTIC):
            semantics[ops[0]] = _string(ops[2:])[0]
        elif i.opcode == OP_EXTENSION:
            extensions.append(_string(ops)[0])
        elif i.opcode == OP_CAPABILITY:
            capabilities.append(_CAPABILITIES.get(ops[0], f"Capability({ops[0]})"))

    variables = m.workgroup_variables()
    alias = m.variable_aliases(variables)
    mads: dict[int, int] = {}
    calls: dict[int, set[int]] = {}
    uses: dict[int, set[int]] = {}
    for i in m.insts:
        if i.function is None:
            continue
        if i.opcode == OP_COOPERATIVE_MATRIX_MUL_ADD_KHR:
            mads[i.function] = mads.get(i.function, 0) + 1
        elif i.opcode == OP_FUNCTION_CALL:
            calls.setdefault(i.function, set()).add(i.operands[2])
            if _MATRIX_MAD_BUILTIN in m.names.get(i.operands[2], ""):
                mads[i.function] = mads.get(i.function, 0) + 1
        uses.setdefault(i.function, set()).update(
            alias[x] for x in _id_operands(i) if x in alias)

    names = {**m.names, **{fn: name for name, fn in entries.items()}}
    kernels = []
    for name, fn in entries.items():
        reach = _reachable(calls, fn)
        used = set().union(*(uses.get(f, set()) for f in reach))
        semantic = semantics.get(fn)
        kernels.append(KernelSpirv(
            name=name, function_id=fn, subgroup_size=subgroup.get(fn),
            register_mode=(DEFAULT_GRF if semantic is None
                           else DOUBLE_GRF if semantic == _DOUBLE_GRF_SEMANTIC else semantic),
            matrix_mads=sum(mads.get(f, 0) for f in reach),
            local_memory_bytes=sum(variables[v] for v in used),
        ))
    return SpirvSummary(
        version=m.version, entry_points=entries, kernels=tuple(kernels),
        matrix_mads=sum(mads.values()),
        matrix_mads_by_function={names.get(f, f"%{f}"): n for f, n in mads.items()},
        extensions=tuple(extensions), capabilities=tuple(capabilities),
        local_memory_bytes=sum(variables.values()),
    )
