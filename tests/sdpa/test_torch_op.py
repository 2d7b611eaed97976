"""``xe2tune.torch``: the operator against torch's own SDPA on the real opencl:cpu device.

Correctness over a small grid (GQA, MQA, torch's top-left causal with q_len below and above
kv_len, row tails, decode), the tensors' own memory reaching the kernels (data pointers), the
tuned config by default, a torch.compile'd module calling ``xe2tune::sdpa`` with no graph break,
routing a model's calls, and the errors for what the operator does not support.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _tuned_store import store_tuned

from xe2tune._tuned import forget_tuned_configs
from xe2tune.errors import InvalidProblem
from xe2tune.kernels import ProblemSpec, family_for
from xe2tune.kernels._tolerance import THRESHOLDS

pytestmark = pytest.mark.requires_xpu

# Bound by _load_torch when the module's first test runs, not at collection: importing torch
# takes about 3 CPU seconds, which each xdist worker paid collecting this module that one of them
# runs. Parameters name torch's dtypes and build tensors in the tests for the same reason.
torch = F = xt = _launch = None
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


@pytest.fixture(scope="module", autouse=True)
def _load_torch() -> None:
    # torch comes with the [test] extra; under CI a missing torch is a failure, not a skip.
    module = importlib.import_module("torch") if os.environ.get("CI") \
        else pytest.importorskip("torch")
    globals().update(torch=module, F=module.nn.functional,
                     xt=importlib.import_module("xe2tune.torch"),
                     _launch=importlib.import_module("xe2tune.torch._launch"))


def built(value):  # noqa: ANN001, ANN201
    """A parameter's value, a tensor made now where the parameter holds how to make it."""
    return value() if callable(value) else value


def torch_dtype(name: str):  # noqa: ANN201  (a torch.dtype: fp16/bf16/fp32, or torch's name)
    return getattr(torch, TORCH_DTYPES.get(name, name))


def _inputs(batch: int, heads_q: int, heads_kv: int, q_len: int, kv_len: int, dtype: str,
            head_dim: int = 64) -> tuple:
    """q, k, v in torch's layout as models make them: [b, s, h, d] memory viewed [b, h, s, d]."""
    g = torch.Generator().manual_seed(q_len * 1000 + kv_len)

    def make(seq: int, heads: int):  # noqa: ANN202
        x = torch.randn(batch, seq, heads, head_dim, generator=g)
        return x.to(torch_dtype(dtype)).transpose(1, 2)

    return make(q_len, heads_q), make(kv_len, heads_kv), make(kv_len, heads_kv)


def _assert_close(got, query, key, value, dtype: str, **kwargs) -> None:  # noqa: ANN001
    """Against torch's own SDPA in float64 on the same inputs, within the dtype's thresholds."""
    ref = F.scaled_dot_product_attention(query.double(), key.double(), value.double(), **kwargs)
    atol, rtol = THRESHOLDS[dtype]
    diff = got.double() - ref
    assert got.shape == ref.shape and got.dtype == query.dtype
    assert torch.isfinite(got).all()
    assert diff.abs().max().item() <= atol
    assert (diff.norm() / ref.norm()).item() <= rtol


# (batch, heads_q, heads_kv, q_len, kv_len, causal): MHA, GQA and MQA; row tails (37, 70 rows);
# top-left causal with fewer and with more queries than keys; decode (1 and 5 queries).
GRID = [
    (1, 4, 4, 64, 64, True),
    (2, 8, 2, 37, 37, True),
    (1, 4, 1, 70, 70, False),
    (2, 4, 2, 40, 100, True),
    (1, 4, 2, 100, 40, True),
    (1, 8, 2, 1, 300, False),
    (2, 4, 4, 5, 77, True),
]


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("case", GRID, ids=lambda c: "b{}h{}/{}q{}kv{}{}".format(
    *c[:5], "c" if c[5] else ""))
def test_matches_torch_sdpa(case: tuple, dtype: str) -> None:
    batch, heads_q, heads_kv, q_len, kv_len, causal = case
    q, k, v = _inputs(batch, heads_q, heads_kv, q_len, kv_len, dtype)
    gqa = heads_q != heads_kv
    out = xt.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    _assert_close(out, q, k, v, dtype, is_causal=causal, enable_gqa=gqa)


def test_scale_and_head_dim_128() -> None:
    q, k, v = _inputs(1, 2, 2, 33, 33, "fp32", head_dim=128)
    out = xt.scaled_dot_product_attention(q, k, v, scale=0.3)
    _assert_close(out, q, k, v, "fp32", scale=0.3)


@pytest.fixture
def addresses(monkeypatch: pytest.MonkeyPatch) -> list[set[int]]:
    """The pointer arguments of every kernel launch (the real launch still runs)."""
    seen: list[set[int]] = []
    real = _launch.submit_at_addresses

    def recording(queue, kernel, args, global_size, local_size):  # noqa: ANN001, ANN202
        seen.append({value for kind, value in args if kind == "ptr"})
        return real(queue, kernel, args, global_size, local_size)

    monkeypatch.setattr(_launch, "submit_at_addresses", recording)
    return seen


def test_transposed_views_reach_the_kernel_in_place(addresses: list[set[int]]) -> None:
    q, k, v = _inputs(2, 4, 2, 40, 40, "fp16")
    out = xt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    pointers = set().union(*addresses)
    assert {q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()} <= pointers
    # the output is [b, q_len, h, D] memory, as the kernels write it
    assert out.transpose(1, 2).is_contiguous()
    _assert_close(out, q, k, v, "fp16", is_causal=True, enable_gqa=True)


def test_other_layouts_are_copied_and_still_right(addresses: list[set[int]]) -> None:
    q, k, v = (t.contiguous() for t in _inputs(1, 4, 4, 40, 40, "fp32"))  # [b, h, s, d] memory
    out = xt.scaled_dot_product_attention(q, k, v)
    assert not {q.data_ptr(), k.data_ptr(), v.data_ptr()} & set().union(*addresses)
    _assert_close(out, q, k, v, "fp32")


PROBLEM = ProblemSpec(mode="prefill", head_dim=64, dtype="fp16", q_len=40, kv_len=40,
                      heads_q=4, heads_kv=2, batch=1, causal=True)


@pytest.fixture
def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'tuned.db'}"
    monkeypatch.setenv("XE2TUNE_DB", url)
    forget_tuned_configs()
    _launch.prepared.cache_clear()
    yield url
    forget_tuned_configs()
    _launch.prepared.cache_clear()


def test_launches_the_tuned_config_unless_forced(cpu_queue, cpu_caps, database: str) -> None:  # noqa: ANN001
    tuned = store_tuned(database, cpu_queue, cpu_caps, PROBLEM)
    family = family_for(PROBLEM, cpu_caps)
    default = family.default_config(PROBLEM, cpu_caps)
    q, k, v = _inputs(1, 4, 2, 40, 40, "fp16")

    def launched(config: str | None) -> dict:
        plan, _ = _launch.prepared(PROBLEM, config, None)
        return dict(plan.defines)

    out = xt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    _assert_close(out, q, k, v, "fp16", is_causal=True, enable_gqa=True)
    assert launched(None) == dict(family.plan(tuned, PROBLEM, cpu_caps).defines)
    assert launched(None) != dict(family.plan(default, PROBLEM, cpu_caps).defines)
    forced = xt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                             config="default")
    _assert_close(forced, q, k, v, "fp16", is_causal=True, enable_gqa=True)
    assert launched("default") == dict(family.plan(default, PROBLEM, cpu_caps).defines)


def _attention(heads: int = 4, head_dim: int = 64):  # noqa: ANN202  (a torch.nn.Module)
    """A transformer's attention block as models write it."""

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(heads * head_dim, 3 * heads * head_dim)

        def forward(self, x):  # noqa: ANN001, ANN202
            b, n, _ = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, heads, head_dim).unbind(2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            return o.transpose(1, 2).reshape(b, n, -1)

    return Attention()


def _ops(graphs: list) -> list:
    return [n.target for g in graphs for n in g.graph.nodes if n.op == "call_function"]


def test_routed_model_compiles_to_the_operator_without_graph_breaks() -> None:
    with torch.no_grad():
        torch._dynamo.reset()
        model = _attention()
        x = torch.randn(1, 48, 256, generator=torch.Generator().manual_seed(3))
        expected = model(x)  # torch's own SDPA
        with xt.route_sdpa(fallback=False):
            eager = model(x)
            explained = torch._dynamo.explain(model)(x)
            compiled = torch.compile(model, fullgraph=True)(x)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        assert torch.ops.xe2tune.sdpa.default in _ops(explained.graphs)
        assert not torch.equal(eager, expected)  # it did not run torch's kernel...
        torch.testing.assert_close(eager, expected, atol=1e-4, rtol=1e-5)  # ...but agrees with it
        torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
        torch._dynamo.reset()


def test_routing_falls_back_to_torch_for_a_masked_call() -> None:
    q, k, v = _inputs(1, 2, 2, 20, 20, "fp32")
    mask = torch.rand(20, 20, generator=torch.Generator().manual_seed(1)) > 0.3
    with xt.route_sdpa():
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(got, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


@pytest.mark.parametrize(("change", "named"), [
    ({"attn_mask": lambda: torch.ones(40, 40, dtype=torch.bool)}, "attn_mask"),
    ({"dropout_p": 0.1}, "dropout_p=0.1"),
    ({"dtype": "float64"}, "torch.float64"),
    ({"head_dim": 80}, "head dim 80"),
    ({"heads_q": 8}, "without enable_gqa=True"),
    ({"requires_grad": True}, "no backward"),
])
def test_unsupported_arguments_raise_one_clear_error_or_fall_back(change: dict, named: str) -> None:
    args = {"dtype": "float32", "head_dim": 64, "heads_q": 2, "requires_grad": False}
    args.update({k: change[k] for k in args.keys() & change.keys()})
    args["dtype"] = torch_dtype(args["dtype"])
    sdpa_args = {k: built(change[k]) for k in ("attn_mask", "dropout_p") if k in change}
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, args["heads_q"], 40, args["head_dim"], generator=g, dtype=args["dtype"])
    k, v = (torch.randn(1, 2, 40, args["head_dim"], generator=g, dtype=args["dtype"])
            for _ in range(2))
    q.requires_grad_(args["requires_grad"])
    with pytest.raises(InvalidProblem, match="supports CPU tensors") as raised:
        xt.scaled_dot_product_attention(q, k, v, **sdpa_args)
    assert named in str(raised.value)
    if "dropout_p" in sdpa_args:
        return  # torch's own dropout is random: nothing to compare
    if "heads_q" in change:  # torch refuses it as well: the fallback is torch, error included
        with pytest.raises(RuntimeError):
            F.scaled_dot_product_attention(q, k, v)
        with pytest.raises(RuntimeError):
            xt.scaled_dot_product_attention(q, k, v, fallback=True)
        return
    got = xt.scaled_dot_product_attention(q, k, v, **sdpa_args, fallback=True)
    assert torch.equal(got, F.scaled_dot_product_attention(q, k, v, **sdpa_args))


def _latent(batch: int, heads_q: int, heads_kv: int, q_len: int, kv_len: int, dtype: str,
            head_dim: int, head_dim_v: int, kv_dtype: str | None = None) -> tuple:
    """q, k in [b, s, h, D] memory and v in [b, s, h, Dv], viewed [b, h, s, d] (k, v in
    kv_dtype when given)."""
    g = torch.Generator().manual_seed(q_len * 7 + kv_len)

    def make(seq: int, heads: int, dim: int, dt: torch.dtype):  # noqa: ANN202
        return torch.randn(batch, seq, heads, dim, generator=g).to(dt).transpose(1, 2)

    kv = torch_dtype(kv_dtype or dtype)
    return (make(q_len, heads_q, head_dim, torch_dtype(dtype)),
            make(kv_len, heads_kv, head_dim, kv),
            make(kv_len, heads_kv, head_dim_v, kv))


@pytest.mark.parametrize(("case", "dtype"), [
    ((2, 8, 2, 37, 70, True, 192, 128), "fp16"),  # MLA prefill, GQA, causal, row tails
    ((1, 16, 1, 1, 300, False, 576, 512), "bf16"),  # absorbed MLA decode: one latent K/V head
], ids=["prefill-192-128", "decode-576-512"])
def test_value_with_its_own_head_dim_matches_torch(case: tuple, dtype: str) -> None:
    batch, heads_q, heads_kv, q_len, kv_len, causal, d, dv = case
    q, k, v = _latent(batch, heads_q, heads_kv, q_len, kv_len, dtype, d, dv)
    out = xt.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert out.shape == (batch, heads_q, q_len, dv)
    _assert_close(out, q, k, v, dtype, is_causal=causal, enable_gqa=True)


@pytest.mark.parametrize(("kv_dtype", "dtype", "per_head"), [
    ("float8_e4m3fn", "fp16", False), ("float8_e5m2", "bf16", True),
    ("float8_e4m3fn", "bf16", True),
], ids=["e4m3-fp16-per-tensor", "e5m2-bf16-per-head", "e4m3-bf16-per-head"])
def test_float8_key_value_match_torch_on_the_dequantized_tensors(
        kv_dtype: str, dtype: str, per_head: bool) -> None:
    q, k, v = _latent(1, 8, 2, 40, 100, dtype, 64, 64, kv_dtype)
    k_scale = torch.tensor([0.5, 1.25]) if per_head else 0.75
    v_scale = torch.tensor([2.0, 0.8]) if per_head else 1.5
    out = xt.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                          k_scale=k_scale, v_scale=v_scale)

    def dequantized(t, scale):  # noqa: ANN001, ANN202
        return t.double() * torch.as_tensor(scale, dtype=torch.float64).reshape(-1, 1, 1)

    ref = F.scaled_dot_product_attention(q.double(), dequantized(k, k_scale),
                                         dequantized(v, v_scale), is_causal=True,
                                         enable_gqa=True)
    atol, rtol = THRESHOLDS[dtype]
    assert out.dtype == q.dtype and torch.isfinite(out).all()
    assert (out.double() - ref).abs().max().item() <= atol
    assert ((out.double() - ref).norm() / ref.norm()).item() <= rtol


@pytest.mark.parametrize(("query_dtype", "kv_dtype", "scales", "named"), [
    ("float32", "float8_e4m3fn", {}, "need a float16 or bfloat16 query"),
    ("float16", "float8_e5m2", {"k_scale": lambda: torch.ones(3)}, "one value per key/value"),
    ("float16", "float16", {"v_scale": 2.0}, "leave them at 1"),
])
def test_float8_misuse_raises_one_clear_error(query_dtype: str, kv_dtype: str, scales: dict,
                                              named: str) -> None:
    q = torch.randn(1, 2, 8, 64).to(torch_dtype(query_dtype))
    k = v = torch.randn(1, 2, 8, 64).to(torch_dtype(kv_dtype))
    scales = {name: built(value) for name, value in scales.items()}
    with pytest.raises(InvalidProblem, match="supports CPU tensors") as raised:
        xt.scaled_dot_product_attention(q, k, v, **scales)
    assert named in str(raised.value) and "\n" not in str(raised.value)
