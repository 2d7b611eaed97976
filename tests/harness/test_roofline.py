"""Roofline arithmetic against hand-computed numbers."""

from __future__ import annotations

import pytest

from xe2tune.harness import DevicePeaks, RooflineModel, catalog_peaks, sdpa_work, visible_pairs
from xe2tune.kernels import ProblemSpec


def test_visible_pairs_by_hand():
    assert visible_pairs(4, 4, False) == 16
    assert visible_pairs(4, 4, True) == 1 + 2 + 3 + 4
    assert visible_pairs(2, 4, True) == 3 + 4  # bottom-right: query 0 sees keys 0..2
    assert visible_pairs(4, 2, True) == 0 + 0 + 1 + 2
    assert visible_pairs(1, 1000, True) == 1000  # decode sees the whole cache


def test_flops_and_bytes_noncausal_mha():
    p = ProblemSpec(mode="prefill", head_dim=128, dtype="fp16", q_len=1024, kv_len=1024,
                    heads_q=8, heads_kv=8, batch=2)
    w = sdpa_work(p)
    assert w.flops_qk == 2 * 2 * 8 * 1024 * 1024 * 128
    assert w.flops == 4 * 2 * 8 * 1024 * 1024 * 128
    assert w.bytes_q == 2 * 1024 * 8 * 128 * 2
    assert w.bytes == 4 * (2 * 1024 * 8 * 128 * 2)


def test_flops_causal_gqa_and_bytes():
    p = ProblemSpec(mode="prefill", head_dim=64, dtype="fp32", q_len=3, kv_len=5,
                    heads_q=8, heads_kv=2, causal=True)
    pairs = 3 + 4 + 5
    w = sdpa_work(p)
    assert w.flops == 2 * 2 * 8 * pairs * 64
    assert w.bytes_k == 5 * 2 * 64 * 4 and w.bytes_q == 3 * 8 * 64 * 4
    total_bytes = 2 * 3 * 8 * 64 * 4 + 2 * 5 * 2 * 64 * 4
    assert w.arithmetic_intensity == pytest.approx(w.flops / total_bytes)


def test_latent_and_fp8_bytes_count_dv_and_one_byte_kv():
    p = ProblemSpec(mode="decode", head_dim=576, dtype="bf16", q_len=1, kv_len=4096,
                    heads_q=16, heads_kv=1, head_dim_v=512, kv_dtype="e4m3")
    w = sdpa_work(p)
    assert w.flops == 2 * 16 * 4096 * (576 + 512)
    assert w.bytes_k == 4096 * 576 and w.bytes_v == 4096 * 512  # one byte per FP8 element
    assert w.bytes_q == 16 * 576 * 2 and w.bytes_o == 16 * 512 * 2


def test_fraction_compute_and_memory_bound():
    peaks = DevicePeaks(flops={"fp16": 100e12, "bf16": 100e12, "fp32": 10e12},
                        bandwidth=500e9, source="catalog")
    model = RooflineModel(peaks)
    # AI 1000 FLOP/B: compute bound, roof = 100 TFLOP/s; 1e12 FLOP in 0.02 s = 50 TFLOP/s
    f = model.figures_for(1e12, 1e9, "fp16", 0.02)
    assert f.attainable_flops == 100e12 and f.roofline_fraction == pytest.approx(0.5)
    # AI 10 FLOP/B: memory bound, roof = 10 * 500 GB/s = 5 TFLOP/s; 1e10 in 4 ms = 2.5 TFLOP/s
    f = model.figures_for(1e10, 1e9, "fp16", 0.004)
    assert f.attainable_flops == pytest.approx(5e12)
    assert f.roofline_fraction == pytest.approx(0.5)
    assert f.gbps == pytest.approx(250)


def test_catalog_matches_by_name():
    b580 = catalog_peaks("Intel(R) Arc(TM) B580 Graphics")
    assert b580 is not None and b580.bandwidth == 456e9 and b580.source == "catalog"
    assert b580.peak_flops("fp16") == pytest.approx(116.7e12)
    assert catalog_peaks("AMD EPYC") is None
