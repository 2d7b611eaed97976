"""Search: spaces of valid configs, samplers, the study loop and replay of recorded spaces."""

from __future__ import annotations

from xe2tune.tuner._budget import TuneBudget
from xe2tune.tuner._problems import ProblemOverrides, default_problems
from xe2tune.tuner._samplers import DEFAULT_SAMPLER, SAMPLER_NAMES, make_sampler
from xe2tune.tuner._search import SearchPlan, run_search
from xe2tune.tuner._space import FiniteSpace
from xe2tune.tuner._study import Outcome, StudyProgress
from xe2tune.tuner._trial_runner import InProcessTrialRunner, TrialRunner

__all__ = [
    "DEFAULT_SAMPLER",
    "SAMPLER_NAMES",
    "FiniteSpace",
    "InProcessTrialRunner",
    "Outcome",
    "ProblemOverrides",
    "SearchPlan",
    "StudyProgress",
    "TrialRunner",
    "TuneBudget",
    "default_problems",
    "make_sampler",
    "run_search",
]
