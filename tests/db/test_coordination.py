"""The SQL coordination's contract suite (xe2tune.testing.coordination_contract) on SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from xe2tune.db import SqlResultStore, open_store
from xe2tune.testing.coordination_contract import CoordinationContract


class TestSqlCoordination(CoordinationContract):
    @pytest.fixture
    def store(self, backend_url: str) -> Iterator[SqlResultStore]:
        store = open_store(backend_url)
        yield store
        store.close()
