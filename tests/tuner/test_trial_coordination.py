"""The trial-coordination contract's suite (xe2tune.testing.trial_coordinator_contract): both
coordinators, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from xe2tune.testing.trial_coordinator_contract import TrialCoordinatorContract


class TestTrialCoordinators(TrialCoordinatorContract):
    @pytest.fixture
    def url(self, backend_url: str) -> str:
        return backend_url
