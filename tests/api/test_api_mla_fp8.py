"""``/v1/best``, ``/v1/results`` and the dashboard's table over HTTP (a real ``xe2tune serve``)
for latent attention (Dv != D) and FP8 K/V problems: the new parameters answer what the store
answers, a query without them reads as before, and bad values are refused with a 422 naming
what is accepted."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest
from _api_fixtures import running_server
from _mla_fp8_store import CASES, FP8_DECODE, MHA_192, MLA_PREFILL, TUNED, fill

from xe2tune.db import BestQuery, open_store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    base = tmp_path_factory.mktemp("mla_fp8_api")
    url = f"sqlite:///{base / 'xe2tune.db'}"
    store = open_store(url)
    fill(store)
    store.close()
    with running_server(url, base / "serve.log") as address:
        yield address, url


def _get(address: str, path: str, **params: object) -> tuple[int, dict]:
    query = urllib.parse.urlencode({k: str(v).lower() if isinstance(v, bool) else v
                                    for k, v in params.items() if v is not None})
    try:
        with urllib.request.urlopen(f"{address}{path}?{query}", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _params(query: BestQuery) -> dict[str, object]:
    return query.model_dump(exclude_none=True)


def test_v1_best_answers_what_the_store_answers(served: tuple[str, str]) -> None:
    address, url = served
    store = open_store(url, read_only=True)
    try:
        for query, _ in CASES:
            status, body = _get(address, "/v1/best", **_params(query))
            best = store.best(query)
            if best is None:
                assert status == 404, (query, body)
                continue
            assert status == 200, (query, body)
            assert (body["config_hash"], body["match"]) == (best.config_hash, best.match)
            assert body["problem"] == best.problem.to_dict()
    finally:
        store.close()


def test_a_query_without_the_new_parameters_reads_as_before(served: tuple[str, str]) -> None:
    address, _ = served
    status, body = _get(address, "/v1/best", head_dim=192, dtype="fp16", seq=1024)
    assert status == 200 and body["match"] == "exact"
    assert body["problem"] == MHA_192.to_dict()
    assert "head_dim_v" not in body["problem"] and "kv_dtype" not in body["problem"]
    assert "head_dim_v" not in body["query"] and "kv_dtype" not in body["query"]
    status, mla = _get(address, "/v1/best", head_dim=192, head_dim_v=128, dtype="fp16",
                       seq=1024)
    assert status == 200 and mla["match"] == "nearest"
    assert mla["problem"]["head_dim_v"] == 128 and mla["query"]["head_dim_v"] == 128
    assert mla["problem"] == MLA_PREFILL.to_dict()
    assert mla["config"]["shape_out"][1] == 128 != body["config"]["shape_out"][1]


def test_nothing_tuned_names_the_group_and_the_search_for_it(served: tuple[str, str]) -> None:
    address, _ = served
    status, body = _get(address, "/v1/best", head_dim=128, dtype="fp16", kv_dtype="e5m2",
                        seq=4096, mode="decode")
    assert status == 404
    assert "head_dim=128 dtype=fp16 kv_dtype=e5m2 mode=decode" in body["detail"]
    assert "xe2tune search --head-dim 128 --kv-dtype e5m2 --dtype fp16" in body["detail"]
    assert "kv_dtype=e4m3" in body["detail"]  # what is tuned, FP8 problems included


@pytest.mark.parametrize(("params", "named"), [
    ({"head_dim_v": 100}, "head_dim_v"),
    ({"kv_dtype": "e3m4"}, "kv_dtype"),
    ({"kv_dtype": "e4m3", "dtype": "fp32"}, "needs dtype fp16 or bf16"),
])
def test_bad_new_parameters_are_a_422(served: tuple[str, str], params: dict, named: str
                                      ) -> None:
    address, _ = served
    status, body = _get(address, "/v1/best", **{"head_dim": 128, "dtype": "fp16", "seq": 512,
                                                **params})
    assert status == 422 and named in json.dumps(body)


def test_results_and_the_dashboard_filter_on_dv_and_kv_dtype(served: tuple[str, str]) -> None:
    address, _ = served
    status, page = _get(address, "/v1/results", kv_dtype="e4m3")
    assert status == 200 and page["total"] == 2
    assert {json.dumps(item["problem"], sort_keys=True) for item in page["items"]} == {
        json.dumps(FP8_DECODE.to_dict() | {"head_dim_v": 128}, sort_keys=True)}
    status, page = _get(address, "/v1/results", head_dim=192, head_dim_v=128)
    assert status == 200 and page["total"] == 2 * 4  # MLA prefill, two MLA decodes, FP8 MLA
    status, summary = _get(address, "/dashboard/summary")
    assert status == 200
    assert summary["filters"]["head_dim_v"] == sorted({p.head_dim_v for p, _ in TUNED})
    assert summary["filters"]["kv_dtype"] == ["bf16", "e4m3", "e5m2", "fp16"]
    status, table = _get(address, "/dashboard/best", kv_dtype="e5m2")
    assert status == 200 and table["total"] == 1
    [row] = table["rows"]
    assert (row["head_dim"], row["head_dim_v"], row["dtype"], row["kv_dtype"]) == (
        192, 128, "bf16", "e5m2")
    status, table = _get(address, "/dashboard/best", head_dim=192, head_dim_v=192)
    assert status == 200 and [r["q_len"] for r in table["rows"]] == [MHA_192.q_len]
    status, body = _get(address, "/dashboard/best", head_dim_v=100)
    assert status == 422 and "accepted: 64, 96, 128, 192, 256, 512" in body["detail"]
