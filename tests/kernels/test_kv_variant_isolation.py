"""The latent-attention and FP8 K/V variants leave the MHA/GQA kernels exactly as they were.

The variants (Dv != D, FP8 K/V) live in their own code: ``kernels/sdpa_kv_variant.hpp`` and
``sdpa_fp8.hpp`` behind a ``KvVariant`` operand type, reached only by builds that define
XE2T_DV or XE2T_KV (``kv_variant_defines``). An fp16/bf16/fp32 MHA/GQA build defines neither,
so its mainloop is instantiated on the same types as before and must compile to the same code.

How this is proven, and why this way: the kernel sources of BASE_COMMIT (main just before the
variants; SHUFFLES_COMMIT for the plans MHA changes of their own touched since) are read from git
history (``git show``) and built with the same defines as this tree's build of the same plan, both
through the real run-time compiler in a capture child (``capture_spirv``, each a fresh build); the
two SPIR-V modules must be equal byte for byte. Building the old sources here, rather than storing
their digests in tests/data, keeps the comparison valid when the SYCL compiler is upgraded (a new
compiler changes both sides alike, and a stored digest would just go stale); the capture cache keys
each capture by its sources, defines and runtime versions, so a run on unchanged sources compares
the captures of the run before and an edit of either side's sources builds it anew. The SPIR-V
carries the type names and mangled names of the instantiations, so even a renamed template
parameter shows. A fresh clone (as CI runs) has the history; a shallow one without BASE_COMMIT
skips with the reason (fails under CI).

For the Xe2 ISA, the native xmx modules (planned for a B580) of both sides are compiled by ocloc
for bmg and their kernels' instructions compared. With equal SPIR-V this follows from the
compiler being deterministic (and ocloc's cache, keyed by the module's digest, compiles an
identical module once), so the ISA comparison is the statement the issue asks for, not an
independent check; it would catch a change in the compile options (``module_options``), which
are derived from the module and its kernels' properties.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import CPU_CAPS

from xe2tune.kernels import ProblemSpec, capture_spirv, catalog_device
from xe2tune.kernels._decode import DecodeFamily
from xe2tune.kernels._prefill import PrefillFamily
from xe2tune.kernels._xe2_compile import compile_module
from xe2tune.kernels._xmx_decode import XmxDecodeFamily
from xe2tune.kernels._xmx_prefill import XmxPrefillFamily
from xe2tune.kernels._zebin import read_zebin

BASE_COMMIT = "2caeb7a"  # main before the K/V variants: ProblemSpec knew Dv, no kernel did
# The vector-lane MHA kernels changed twice after the variants landed, each an MHA change of its
# own: 6fc5ec3 (the decode of several KV heads per work-group: scores key-major across the heads,
# V prefetched by P x V) and SHUFFLES_COMMIT (the tile ops pick lanes by __builtin_shufflevector
# instead of sycl::vec swizzles: the same shuffles, a cheaper front end; the SPIR-V differs in
# shuffle counts and unrolling). The vector-lane plans compare with the later one, so the variant
# work since cannot have touched them either; the xmx plans with BASE_COMMIT.
SHUFFLES_COMMIT = "8d0da76"
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600.0

pytestmark = pytest.mark.requires_xpu


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True,
                          check=False)


@pytest.fixture(scope="module")
def sources_of() -> Callable[[str], dict[str, str]]:
    """The kernel sources (.cpp/.hpp under kernels/) of a commit, by file name."""

    @functools.cache
    def sources(commit: str) -> dict[str, str]:
        listing = _git("ls-tree", "--name-only", f"{commit}:kernels")
        if listing.returncode != 0:
            reason = f"git history without {commit}: {listing.stderr.strip()}"
            if os.environ.get("CI"):
                pytest.fail(f"CI runs on a clone with history: {reason}")
            pytest.skip(reason)
        names = [n for n in listing.stdout.split() if n.endswith((".cpp", ".hpp"))]
        return {n: _git("show", f"{commit}:kernels/{n}").stdout for n in names}

    return sources


def _plans():
    b580 = catalog_device("b580").caps
    gqa = dict(heads_q=8, heads_kv=2)
    prefill = ProblemSpec("prefill", 128, "fp16", 256, 256, causal=True, **gqa)
    decode = ProblemSpec("decode", 64, "bf16", 1, 4096, heads_q=8, heads_kv=1)
    packed = ProblemSpec("prefill", 64, "fp32", 512, 512)
    heads = ProblemSpec("decode", 128, "fp16", 1, 4096, heads_q=32, heads_kv=8)
    cases = [
        ("prefill-fp16-gqa-default", PrefillFamily(), prefill, CPU_CAPS, None, SHUFFLES_COMMIT),
        ("decode-bf16-mqa-default", DecodeFamily(), decode, CPU_CAPS, None, SHUFFLES_COMMIT),
        ("prefill-fp32-kv_pack", PrefillFamily(), packed, CPU_CAPS,
         {"bq": 64, "bk": 32, "bd": 16, "bv": 16, "stages": 1, "subgroup_size": 8,
          "rows_per_item": 8, "kv_stage": True, "kv_pack": True}, SHUFFLES_COMMIT),
        # 8 KV heads per work-group (the default): the key-major path, prefetching rows (the
        # AVX2 default since prefetches in shares, an MHA change of its own)
        ("decode-fp16-gqa-heads-rows", DecodeFamily(), heads, CPU_CAPS,
         {**DecodeFamily().params_from_config(DecodeFamily().default_config(heads, CPU_CAPS)),
          "prefetch_shares": False}, SHUFFLES_COMMIT),
    ]
    for dtype in ("fp16", "bf16"):
        xp = ProblemSpec("prefill", 128, dtype, 512, 512, **gqa)
        xd = ProblemSpec("decode", 128, dtype, 1, 4096, **gqa)
        cases += [(f"xmx-prefill-{dtype}-{b.label}", XmxPrefillFamily(), xp, b580,
                   XmxPrefillFamily().params_from_config(b.config), BASE_COMMIT)
                  for b in XmxPrefillFamily().baselines(xp, b580)[:1]]
        cases.append((f"xmx-decode-{dtype}-default", XmxDecodeFamily(), xd, b580, None,
                      BASE_COMMIT))
    return [pytest.param(*c[1:], id=c[0].replace(" ", "_")) for c in cases]


@pytest.mark.parametrize("family,problem,caps,params,base", _plans())
def test_mha_kernels_compile_to_the_spirv_and_isa_of_the_kernels_before_the_variants(
        family, problem, caps, params, base, sources_of, request):
    config = (family.default_config(problem, caps) if params is None
              else family.config_from_params(problem, params))
    plan = family.plan(config, problem, caps)
    assert not {"DV", "KV"} & set(plan.defines), plan.defines  # the variants' switches
    # Both sides built fresh: an image served from the runtime's persistent cache was seen to
    # dump with other value names (".loopexit") than a fresh build of the same source.
    new = capture_spirv(plan, timeout_s=TIMEOUT_S, fresh_build=True)
    old = capture_spirv(plan, timeout_s=TIMEOUT_S, sources=sources_of(base), fresh_build=True)
    assert len(new.images) == len(old.images) >= 1
    for new_image, old_image in zip(new.images, old.images, strict=True):
        assert new_image == old_image, f"{plan.source_file}: the SPIR-V differs from {base}"
    if not plan.needs_intel_gpu:
        return
    compiler = request.getfixturevalue("xe2_compiler")
    for capture in (new, old):
        assert capture.kernels
    outcomes = [compile_module(c.images[0], c.modules[0], target="bmg", compiler=compiler,
                               timeout_s=TIMEOUT_S) for c in (new, old)]
    isa = [read_zebin(o.zebin).isa for o in outcomes]
    assert isa[0].keys() == isa[1].keys() and isa[0]
    for name in isa[0]:
        assert isa[0][name] == isa[1][name], f"{name}: the bmg ISA differs from {base}"
