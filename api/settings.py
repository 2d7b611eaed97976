"""The service's settings: one frozen model, built once from :mod:`xe2tune.config`.

pydantic-settings' ``BaseSettings`` would read the environment itself; xe2tune reads environment
variables only in ``xe2tune.config``, so ``Settings`` is a plain frozen pydantic model that
:func:`get_settings` fills from there. Tests pass their own ``Settings`` to ``create_app`` or
override :func:`get_settings` through ``app.dependency_overrides``.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from xe2tune import config
from xe2tune.api._guards import LOOPBACK_HOSTS

MAX_BODY_BYTES = 1 << 20  # a submission with 1000 samples is about 30 KB


class Settings(BaseModel):
    """What one running service needs to know; never mutated after start."""

    model_config = ConfigDict(frozen=True)

    db_url: str | None = Field(
        default=None, description="SQLAlchemy URL of the results database; None = the default"
    )
    api_token: str | None = Field(
        default=None, description="Bearer token enabling POST /v1/results; None disables it"
    )
    index_poll_s: float = Field(
        default=0.5, gt=0, description="How often the /v1/best index checks the data version"
    )
    dashboard_poll_s: float = Field(
        default=5.0, gt=0, description="How often the dashboard page asks whether data changed"
    )
    allowed_hosts: tuple[str, ...] = Field(
        default=LOOPBACK_HOSTS, min_length=1,
        description="Host header names answered (others get 400: DNS rebinding); loopback by "
                    "default, `xe2tune serve --host/--allowed-host` add names",
    )
    max_body_bytes: int = Field(
        default=MAX_BODY_BYTES, ge=1, description="Larger request bodies are refused with 413"
    )


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings from the environment (``XE2TUNE_DB``, ``XE2TUNE_API_TOKEN``,
    ``XE2TUNE_ALLOWED_HOSTS``)."""
    return Settings(db_url=config.database_url(), api_token=config.api_token(),
                    allowed_hosts=LOOPBACK_HOSTS + config.allowed_hosts())
