"""``/v1/studies``: tuning studies and their trials."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path

from xe2tune.api.deps import DeviceFilter, StoreDep
from xe2tune.api.schemas import ErrorPublic, ValidationErrorPublic
from xe2tune.db import StudyRecord, TrialRow

MAX_ID = 2**63 - 1
StudyId = Annotated[int, Path(ge=1, le=MAX_ID, description="study id")]

router = APIRouter(prefix="/v1/studies", tags=["studies"],
                   responses={422: {"model": ValidationErrorPublic}})


@router.get("", response_model=list[StudyRecord])
def list_studies(store: StoreDep, device: DeviceFilter) -> list[StudyRecord]:
    """Every study with its trial counts and best median, oldest first."""
    return store.studies(device)


@router.get("/{study_id}", response_model=StudyRecord, responses={404: {"model": ErrorPublic}})
def get_study(study_id: StudyId, store: StoreDep) -> StudyRecord:
    """One study."""
    study = store.study(study_id)
    if study is None:
        raise HTTPException(404, f"no study {study_id}; list them at /v1/studies")
    return study


@router.get("/{study_id}/trials", response_model=list[TrialRow],
            responses={404: {"model": ErrorPublic}})
def list_trials(study_id: StudyId, store: StoreDep) -> list[TrialRow]:
    """Every trial of a study with its measurement and raw samples, in the order stored."""
    if store.study(study_id) is None:
        raise HTTPException(404, f"no study {study_id}; list them at /v1/studies")
    return store.trials(study_id)
