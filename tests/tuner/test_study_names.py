"""A stored study whose space the family has since changed: continued in a study of its own.

A family's space can change without its kernel sources (a knob value added in Python), so the
study's name (which carries the sources' hash) stays; optuna refuses another set of
categorical choices for a parameter its study has trials of.
"""

from __future__ import annotations

import optuna
import pytest

from xe2tune.tuner._space import FiniteSpace
from xe2tune.tuner._study import study_name_for_space

NAME = 'xe2tune|dev|drv|2cu|sdpa_decode@0123456789abcdef|{"mode":"decode"}'
BEFORE = FiniteSpace.from_params({"hb": [1, 2, 4, 8, 16], "stages": [0, 1]},
                                 valid=lambda c: True)
AFTER = FiniteSpace.from_params({"hb": [1, 2, 4, 8, 16, 32], "stages": [0, 1]},
                                valid=lambda c: True)


@pytest.fixture
def storage(tmp_path):
    return optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")


def sampled(storage, name: str, space: FiniteSpace) -> optuna.Study:
    study = optuna.create_study(study_name=name, storage=storage, load_if_exists=True)
    study.tell(study.ask(space.distributions()), 1.0)
    return study


def test_a_new_or_unchanged_study_keeps_its_name(storage):
    assert study_name_for_space(storage, NAME, BEFORE) == NAME
    sampled(storage, NAME, BEFORE)
    assert study_name_for_space(storage, NAME, BEFORE) == NAME


def test_a_changed_space_gets_a_study_of_its_own_that_optuna_accepts(storage):
    sampled(storage, NAME, BEFORE)
    with pytest.raises(ValueError, match="dynamic value space"):
        sampled(storage, NAME, AFTER)  # what a search met before: a traceback
    renamed = study_name_for_space(storage, NAME, AFTER)
    assert renamed != NAME
    # The problem key stays the last field (worker tokens are checked on it), the prefix first.
    assert renamed.rsplit("|", 1)[1] == NAME.rsplit("|", 1)[1]
    assert renamed.startswith("xe2tune|dev|drv|2cu|sdpa_decode@0123456789abcdef~space-")
    sampled(storage, renamed, AFTER)
    # Every later opener derives the same name, and the space's own study is then kept.
    assert study_name_for_space(storage, NAME, AFTER) == renamed
    assert study_name_for_space(storage, renamed, AFTER) == renamed
    # Going back to the first space finds the first study again.
    assert study_name_for_space(storage, NAME, BEFORE) == NAME
