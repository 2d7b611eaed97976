"""The OpenAPI schema fuzzed with schemathesis against a running ``xe2tune serve``: no 5xx.

Each operation gets a bounded number of hypothesis examples (derandomized, so a run is
repeatable). schemathesis' own pytest fixture loader does not run under pytest 9, so the
operations are driven directly with ``APIOperation.as_strategy()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from _api_fixtures import fill_database, running_server
from hypothesis import HealthCheck, given, settings

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES_PER_OPERATION = 40


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Its own database: fuzzed POSTs carry the token and may store rows.
    base = tmp_path_factory.mktemp("fuzz")
    filled = fill_database(str(base / "fuzz.db"))
    with running_server(filled.url, base / "serve.log", token=TOKEN) as url:
        yield url


@pytest.mark.slow
def test_no_operation_answers_a_server_error(live: str) -> None:
    schema = schemathesis.openapi.from_url(f"{live}/openapi.json")
    failures: list[str] = []
    labels = []
    for loaded in schema.get_all_operations():
        operation = loaded.ok()
        labels.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck), database=None)
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call(headers=AUTH, timeout=30)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} query={case.query} "
                                f"body={str(case.body)[:200]} -> {response.status_code} "
                                f"{response.text[:200]}")

        fuzz()
    assert "GET /v1/best" in labels and "POST /v1/results" in labels
    assert failures == []
