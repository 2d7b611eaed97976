"""How much searching and confirming a run may do."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TuneBudget:
    """Per-problem trial count, an overall deadline, and early stopping.

    ``trials`` counts trials started in this run for each problem (configs stored by earlier runs
    are reused, never re-measured), or with ``top_up`` the study's stored trials too: a run then
    adds only what the study lacks, so repeating a finished search measures nothing and answers
    from the stored trials and confirmation round; ``patience`` stops a study after that many
    consecutive trials without a new best.
    """

    trials: int
    timeout_s: float | None = None
    patience: int | None = None
    top_up: bool = False

    def __post_init__(self) -> None:
        if self.trials < 1:
            raise ValueError(f"--trials must be >= 1, got {self.trials}")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ValueError(f"--timeout must be > 0 seconds, got {self.timeout_s}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"--patience must be >= 1, got {self.patience}")


@dataclass(frozen=True)
class ConfirmSettings:
    """How hard to confirm: ``rounds`` alternating rounds over the ``top`` fastest configs."""

    rounds: int = 4
    top: int = 3

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"--confirm-rounds must be >= 1, got {self.rounds}")
        if self.top < 1:
            raise ValueError(f"the confirmation needs at least one config, got top={self.top}")
