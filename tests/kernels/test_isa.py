"""Intel's Xe2 compiler: discovery, compile verdicts, the on-disk cache and the ISA report.

The probe modules under ``tests/data/`` are SPIR-V the SYCL runtime compiler dumped for
``isa_probe.cpp`` and ``isa_probe_error.cpp`` (regenerate: build the source on opencl:cpu with
``SYCL_DUMP_IMAGES=1`` and ``CL_CONFIG_CPU_VECTORIZER_MODE=0``, as ``capture_spirv`` does; the
CPU build of the 2D-block kernel fails, its SPIR-V is dumped first). Tests that compile them
need the compiler (``scripts/install-xe2-compiler``): they are skipped with the reason without
it, except under CI (``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _api_fixtures import xe2tune_command

from xe2tune.kernels import (
    INSTALL_SCRIPT,
    LARGE_GRF_OPTION,
    IsaJob,
    ModuleIsa,
    Verdict,
    Xe2Compiler,
    ZebinError,
    catalog_device,
    compile_isa,
    compile_isa_all,
    count_dpas_loop,
    count_isa,
    locate_xe2_compiler,
    parse_spirv,
    read_zebin,
)

DATA = Path(__file__).parents[1] / "data"


@pytest.fixture(autouse=True)
def private_isa_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Each test starts with an empty ISA cache of its own."""
    monkeypatch.setenv("XE2TUNE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "isa"


def job(name: str, target: str = "bmg") -> IsaJob:
    image = (DATA / f"{name}.spv").read_bytes()
    return IsaJob(image, parse_spirv(image), target)


def kernel_of(module: ModuleIsa, name: str):
    (found,) = [k for k in module.kernels if k.kernel == name]
    return found


def fake_ocloc(tmp_path: Path, body: str) -> Xe2Compiler:
    script = tmp_path / "ocloc"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return Xe2Compiler(str(script), None, f"fake {body}", "test")


@pytest.mark.parametrize("target", ["bmg", "lnl-m"])
def test_block2d_kernel_loads_prefetches_stores_and_dpas(xe2_compiler, target):
    (module,) = compile_isa_all([job("isa_probe_block2d", target)])
    assert module.verdict is Verdict.COMPILED and module.target == target
    assert module.compiler_version == xe2_compiler.version and module.options == ()
    k = kernel_of(module, "xe2t_isa_block2d")
    assert (k.simd, k.grf_count, k.threads_per_eu) == (16, 128, 8)
    assert k.spill_bytes == 0 and k.private_bytes == 0 and k.slm_bytes == 0 and k.has_dpas
    c = k.counts
    assert c.dpas == 2 and c.block2d_loads == 3 and c.block2d_prefetches == 1
    assert c.block2d_loads_by_form == {"plain": 1, "transposed": 1, "vnni": 1}
    assert c.block2d_loads_by_element == {"d16": 2, "d32": 1}
    assert c.block2d_stores == 1 and c.scratch_messages == 0 and c.barriers == 0
    assert (c.global_loads, c.global_stores, c.global_atomics) == (0, 0, 0)
    assert 20 < c.instructions < 200
    assert k.to_dict()["block2d_loads_by_form"]["vnni"] == 1 and "2 DPAS" in k.text()


def test_local_memory_barrier_and_global_messages(xe2_compiler):
    (module,) = compile_isa_all([job("isa_probe_local_spill")])
    k = kernel_of(module, "xe2t_isa_local")
    assert k.slm_bytes == 256 and k.spill_bytes == 0 and not k.has_dpas
    c = k.counts
    assert c.barriers == 1 and c.slm_messages == 2 and c.fences == 2
    assert (c.global_loads, c.global_stores, c.global_atomics) == (1, 1, 1)
    assert c.dpas == 0 and c.block2d_loads == 0 and c.scratch_messages == 0


def test_spills_with_128_registers_and_none_with_256(xe2_compiler):
    small, large = compile_isa_all([job("isa_probe_local_spill"), job("isa_probe_grf256")])
    spill = kernel_of(small, "xe2t_isa_spill")
    assert small.options == () and spill.grf_count == 128 and spill.threads_per_eu == 8
    assert spill.spill_bytes > 0 and spill.counts.scratch_messages > 0
    assert spill.log_spill_estimate > 0 and f"SPILLS {spill.spill_bytes} B" in spill.text()
    roomy = kernel_of(large, "xe2t_isa_spill256")
    assert large.options == (LARGE_GRF_OPTION,)
    assert roomy.grf_count == 256 and roomy.threads_per_eu == 4
    assert roomy.spill_bytes == 0 and roomy.counts.scratch_messages == 0


def test_compile_error_gives_the_first_error_line(xe2_compiler):
    module = compile_isa(job("isa_probe_error"))
    assert module.verdict is Verdict.ERROR
    assert "Pointer type not found when resolving prefetch" in module.message
    (k,) = module.kernels
    assert k.kernel == "xe2t_isa_generic_prefetch" and k.verdict is Verdict.ERROR
    assert k.grf_count is None and k.counts is None and k.message == module.message


def test_outcomes_are_cached_by_spirv_target_and_options(xe2_compiler, private_isa_cache):
    first = compile_isa(job("isa_probe_block2d"))
    again = compile_isa(job("isa_probe_block2d"))
    assert not first.cached and again.cached and again.kernels == first.kernels
    assert not compile_isa(job("isa_probe_block2d", "lnl-m")).cached
    assert compile_isa(job("isa_probe_error")).verdict is Verdict.ERROR
    assert compile_isa(job("isa_probe_error")).cached  # a compile error is kept too
    assert len(list(private_isa_cache.glob("*.json"))) == 3


def test_a_crash_is_its_own_verdict_and_is_not_cached(tmp_path, private_isa_cache):
    crashing = fake_ocloc(tmp_path, "kill -SEGV $$")
    module = compile_isa(job("isa_probe_block2d"), compiler=crashing)
    assert module.verdict is Verdict.CRASHED and module.message == "crashed: SIGSEGV in IGC"
    assert [k.verdict for k in module.kernels] == [Verdict.CRASHED]
    assert not compile_isa(job("isa_probe_block2d"), compiler=crashing).cached
    assert not private_isa_cache.exists() or not list(private_isa_cache.iterdir())


def test_a_timeout_is_its_own_verdict(tmp_path):
    module = compile_isa(job("isa_probe_block2d"), compiler=fake_ocloc(tmp_path, "sleep 30"),
                         timeout_s=0.5)
    assert module.verdict is Verdict.TIMEOUT and "0.5 s" in module.message


def test_an_ocloc_without_xe2_is_refused_with_how_to_get_one(monkeypatch, tmp_path):
    old = fake_ocloc(tmp_path, "echo '<device_type> can be: tgllp, dg2, pvc'")
    monkeypatch.setenv("XE2TUNE_OCLOC", old.ocloc)
    locate_xe2_compiler.cache_clear()
    try:
        lookup = locate_xe2_compiler()
    finally:
        locate_xe2_compiler.cache_clear()
    assert lookup.compiler is None and "XE2TUNE_OCLOC" in lookup.reason
    assert INSTALL_SCRIPT in lookup.reason and "\n" not in lookup.reason


def test_nothing_installed_names_the_install_script(monkeypatch, tmp_path):
    monkeypatch.delenv("XE2TUNE_OCLOC", raising=False)
    monkeypatch.setenv("XE2TUNE_XE2_COMPILER_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path))
    locate_xe2_compiler.cache_clear()
    try:
        lookup = locate_xe2_compiler()
    finally:
        locate_xe2_compiler.cache_clear()
    assert lookup.compiler is None and INSTALL_SCRIPT in lookup.reason
    assert str(tmp_path / "none") in lookup.reason


def test_counts_read_from_a_listing():
    listing = "\n".join([
        "L0:",
        "(W)     mov (16|M0)              r2.0<1>:ud    r0.0<1;1,0>:ud",
        "        send.ugm (1|M0)          r5       r9  null:0  0x0  0x02400203  {$0} "
        "// wr:1+0, rd:4; load_block2d.ugm.d16.a64",
        "        send.ugm (1|M0)          null     r3  null:0  0x0  0x02080203  {$3} "
        "// wr:1+0, rd:0; load_block2d.ugm.d16.a64.ca.ca",
        "        send.ugm (16|M0)         r8  r4  null:0  0x0  0x0  {$1} "
        "// wr:1+0, rd:1; load.ugm.d32x16t.a32.ss[a0.2][A-0xEA00]",
        "(W)     send.ugm (1|M0)          r1  r127  null:0  0xFF000000  0x6219D500  {$0} "
        "// wr:1+0, rd:1; load.ugm.d32x16t.a32.ca.cc.bti[255]",
        "        dpas.8x8 (16|M0)         r28:f  null:f  r10:hf  r5.0:hf  {$0}",
        "(W)     sync.bar                             0x0",
        "(W)     send.gtwy (1|M0)         null     r127  null:0  0x0  0x02000010  {EOT,$4} "
        "// wr:1+0, rd:0; end of thread",
        "L720:",
        "(W)     mov (16|M0)              null<1>:ud    0x5A624C23:ud",
        "        illegal",
    ])
    c = count_isa(listing)
    assert c.instructions == 8 and c.dpas == 1 and c.barriers == 1
    assert c.block2d_loads == 1 and c.block2d_prefetches == 1 and c.scratch_messages == 1
    assert c.block2d_loads_by_form == {"plain": 1} and c.global_loads == 0
    assert c.other_sends == 1  # the payload load


def test_the_dpas_loop_is_the_innermost_loop_around_every_dpas():
    mov = "(W)     mov (16|M0)              r2.0<1>:ud    r0.0<1;1,0>:ud"
    dpas = "        dpas.8x8 (16|M0)         r28:f  null:f  r10:hf  r5.0:hf  {$0}"
    scattered = ("        send.ugm (16|M0)         r94      r66  null:0  0x0  0x04180580  {$11} "
                 "// wr:2+0, rd:1; load.ugm.d32.a64.ca.ca")
    listing = "\n".join([
        "L0:", mov, scattered,                       # before the loop: not counted in it
        "L100:", mov,                                # outer loop
        "L200:", mov, dpas, scattered, dpas, mov,    # inner loop: both dpas
        "(f0.0)  jmpi                                 L200",
        "(f1.0)  jmpi                                 L100",
        "(W)     jmpi                                 L900",  # forward: no loop
        "L900:",
        "(W)     send.gtwy (1|M0)         null     r127  null:0  0x0  0x02000010  {EOT,$4} "
        "// wr:1+0, rd:0; end of thread",
    ])
    loop = count_dpas_loop(listing)
    assert loop.dpas == 2 and loop.global_loads == 1 and loop.instructions == 6
    no_inner = listing.replace("L200\n", "L900\n")  # the inner back branch jumps forward
    assert count_dpas_loop(no_inner).instructions == 8  # then the outer loop holds them
    assert count_dpas_loop(listing.replace("dpas.8x8", "mad")) is None


def test_bytes_that_are_not_a_zebin_are_refused():
    with pytest.raises(ZebinError, match="ELF"):
        read_zebin(b"\x03\x02\x23\x07" * 32)


@pytest.mark.parametrize(("key", "device"), [
    ("b580", "bmg"), ("b570", "bmg"), ("140v", "lnl-m"), ("arc140v", "lnl-m"),
    ("a770", "dg2"), ("max1550", "pvc"),
])
def test_catalog_names_the_ocloc_device(key, device):
    assert catalog_device(key).ocloc_device == device


def test_inspect_isa_without_the_compiler_is_one_line(tmp_path):
    env = {**os.environ, "XE2TUNE_OCLOC": str(tmp_path / "no-ocloc")}
    proc = subprocess.run([xe2tune_command(), "inspect", "--head-dim", "64", "--seq", "128",
                           "--target", "b580", "--isa"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert INSTALL_SCRIPT in line and "XE2TUNE_OCLOC" in line
