"""Test support shipped with xe2tune, for its own tests and for other ResultStore implementations.

``xe2tune.testing`` itself imports nothing of the ``[test]`` extra: its builders
(``xe2tune.testing.records``, re-exported here) make real result values. The conformance suites
need pytest and are imported on their own: ``xe2tune.testing.store_contract.StoreContract``
(any ``ResultStore``), ``xe2tune.testing.coordination_contract.CoordinationContract`` (the
SQL coordination's leases, reservations and slots, on any database) and
``xe2tune.testing.trial_coordinator_contract.TrialCoordinatorContract`` (the kill and race
scenarios of both trial coordinators).
"""

from __future__ import annotations

# The builders are this package's surface: re-exported as records.py lists them.
from xe2tune.testing.records import *  # noqa: F403
from xe2tune.testing.records import __all__  # noqa: F401
