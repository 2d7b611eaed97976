"""One record, one shape: the measurement's fields are declared once (``xe2tune.measurement``)
and every copy of them (database columns, stored records, API payloads) agrees."""

from __future__ import annotations

import itertools
import json
from dataclasses import fields

import pytest
from sqlalchemy import inspect

from xe2tune.db import CorrectnessPayload, MeasurementRecord, RooflinePayload, TimingPayload
from xe2tune.db._models import Measurement
from xe2tune.kernels import HEAD_DIMS, ProblemSpec, device_catalog, families_for
from xe2tune.measurement import (
    CORRECTNESS_FIELDS,
    ROOFLINE_FIELDS,
    TIMING_FIELDS,
    CorrectnessReport,
    RooflineFigures,
    TimingStats,
    TrialResult,
)
from xe2tune.testing import launcher_config, ok_result

SUMMARY = {*TIMING_FIELDS, *ROOFLINE_FIELDS, *CORRECTNESS_FIELDS, "passed"}


def test_the_field_lists_are_the_dataclasses_fields() -> None:
    timing = ok_result(launcher_config(), 1e-3).timing
    assert tuple(timing.summary()) == TIMING_FIELDS
    assert ROOFLINE_FIELDS == tuple(f.name for f in fields(RooflineFigures))
    assert CORRECTNESS_FIELDS == tuple(f.name for f in fields(CorrectnessReport))
    assert {f.name for f in fields(TimingStats)} - {"samples"} <= set(TIMING_FIELDS)


def test_every_copy_of_the_fields_agrees() -> None:
    assert SUMMARY <= {c.key for c in inspect(Measurement).column_attrs}
    assert set(MeasurementRecord.model_fields) == SUMMARY | {"samples"}
    assert tuple(RooflinePayload.model_fields) == ROOFLINE_FIELDS
    assert tuple(CorrectnessPayload.model_fields) == CORRECTNESS_FIELDS
    assert set(TimingPayload.model_fields) == {"samples", "warmup", "n_buf", "host_overhead_s"}


def test_a_result_crosses_a_process_as_json_only_for_the_config_it_measured() -> None:
    config, other = launcher_config(), launcher_config(128)
    result = ok_result(config, 1e-3)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["config"] == config.to_dict() and data["config_hash"] == config.config_hash()
    assert TrialResult.from_dict(data, config) == result
    with pytest.raises(ValueError, match="was read as one of"):
        TrialResult.from_dict(data, other)


def test_a_trials_params_look_up_the_config_the_family_would_make() -> None:
    # The study maps a trial's params to its config by the space's index (``valid_space``)
    # instead of converting them again: right only while converting a valid config to params
    # and back gives the same config. Checked on every seeded baseline of every catalog device
    # and on each family's default for one head dim (a default, like a whole space, takes
    # seconds to choose).
    checked = set()
    for device in device_catalog():
        for head_dim, mode in itertools.product(HEAD_DIMS, ("prefill", "decode")):
            problem = ProblemSpec(mode=mode, head_dim=head_dim, dtype="fp16",
                                  q_len=1 if mode == "decode" else 512, kv_len=512)
            for family in families_for(problem, device.caps):
                configs = [b.config for b in family.baselines(problem, device.caps)]
                if device.key in ("b580", "a770") and head_dim == 128:  # matrix, vector-lane
                    configs.append(family.default_config(problem, device.caps))
                for config in configs:
                    params = family.params_from_config(config)
                    assert family.config_from_params(problem, params) == config
                    checked.add(family.name)
    assert checked == {"sdpa_prefill", "sdpa_decode", "sdpa_xmx_prefill", "sdpa_xmx_decode"}
