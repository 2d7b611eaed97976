"""Who is calling: the server's API token, or a campaign's worker token, or nobody we know.

Both remote channels (``POST /v1/results`` and the gRPC storage proxy) ask the same question
with the same answers. The API token (``XE2TUNE_API_TOKEN`` of the server) reaches everything; a
worker token (``xe2tune campaign token create``) reaches only its campaign: the optuna study
holding the campaign's definition, the device studies of the campaign's problems (whatever
device: a token names no device) and results of those problems.
"""

from __future__ import annotations

import enum
import secrets
import threading
from dataclasses import dataclass

from xe2tune.db import CAMPAIGN_STUDY, CampaignStore, ResultStore, WorkerTokenStore
from xe2tune.kernels import ProblemSpec

# A device study's name is
# "xe2tune|<device>|<driver>|<CUs>|<family@source>[~space-<tag>]|<problem key>"
# (xe2tune.tuner's study_name and study_name_for_space); the problem key is the last field.
DEVICE_STUDY_PREFIX = "xe2tune|"


class Refusal(enum.Enum):
    """Why a credential was refused: none given, not one we minted, or revoked."""

    MISSING = "missing"
    UNKNOWN = "unknown"
    REVOKED = "revoked"


class CredentialRefused(Exception):
    """The caller is not let in; ``refusal`` says why, the message says it in one line."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


@dataclass(frozen=True)
class Caller:
    """An identified caller: ``campaign_id`` None for the API token (every study), else the
    worker token's campaign and the keys of its problems."""

    campaign_id: int | None
    problem_keys: frozenset[str] = frozenset()
    token_id: int | None = None

    def may_touch_study(self, name: str) -> bool:
        """Whether this caller may read or write the optuna study of this name."""
        if self.campaign_id is None:
            return True
        if name == CAMPAIGN_STUDY.format(id=self.campaign_id):
            return True
        return name.startswith(DEVICE_STUDY_PREFIX) and name.rsplit("|", 1)[-1] in \
            self.problem_keys

    def may_submit(self, problem: ProblemSpec) -> bool:
        """Whether this caller may store a result of this problem."""
        return self.campaign_id is None or problem.key() in self.problem_keys


class Credentials:
    """Identifies callers against the API token and the database's worker tokens.

    Thread-safe: the gRPC proxy calls it from its pool. Every call reads the token's row, so a
    revocation holds from the next call on; a campaign's problems never change once created and
    are read once.
    """

    def __init__(self, store: ResultStore, api_token: str | None) -> None:
        self._tokens = WorkerTokenStore(store)
        self._campaigns = CampaignStore(store)
        self._api_token = api_token
        self._problems: dict[int, frozenset[str]] = {}
        self._lock = threading.Lock()

    @property
    def tokens(self) -> WorkerTokenStore:
        """The worker tokens' store (for scope reads of optuna studies)."""
        return self._tokens

    def identify(self, presented: str | None) -> Caller:
        """The caller presenting this token.

        Raises:
            CredentialRefused: no token, a token nobody minted, or a revoked one.
            StoreError: the database failed.
        """
        if not presented:
            raise CredentialRefused(Refusal.MISSING, "no credential: send 'authorization: "
                                    "Bearer <token>' (XE2TUNE_WORKER_TOKEN on the worker)")
        if self._api_token is not None and secrets.compare_digest(
                presented.encode(), self._api_token.encode()):
            return Caller(campaign_id=None)
        record = self._tokens.find(presented)
        if record is None:
            raise CredentialRefused(Refusal.UNKNOWN, "wrong token: neither the server's "
                                    "XE2TUNE_API_TOKEN nor a worker token of `xe2tune campaign "
                                    "token create`")
        if record.revoked:
            raise CredentialRefused(Refusal.REVOKED, f"worker token {record.id} of campaign "
                                    f"{record.campaign_id} was revoked")
        return Caller(campaign_id=record.campaign_id, token_id=record.id,
                      problem_keys=self._problem_keys(record.campaign_id))

    def _problem_keys(self, campaign_id: int) -> frozenset[str]:
        with self._lock:
            found = self._problems.get(campaign_id)
        if found is None:
            # (a token's campaign exists: deleting a campaign deletes its tokens)
            found = frozenset(p.key() for p in self._campaigns.get(campaign_id).problems)
            with self._lock:
                self._problems[campaign_id] = found
        return found
