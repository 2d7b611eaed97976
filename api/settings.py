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


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings from the environment (``XE2TUNE_DB``, ``XE2TUNE_API_TOKEN``)."""
    return Settings(db_url=config.database_url(), api_token=config.api_token())
