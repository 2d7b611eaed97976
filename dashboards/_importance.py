"""Per study: which search parameters mattered, from optuna's importance evaluator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xe2tune.dashboards._plotly_imports import graph_objects

if TYPE_CHECKING:
    import optuna

MIN_TRIALS = 2


@dataclass(frozen=True)
class ImportanceInfo:
    """Parameter names with importances summing to 1, or a note saying why there are none."""

    study_id: int
    params: tuple[str, ...]
    importances: tuple[float, ...]
    note: str | None


def get_importance_info(study_id: int, study: optuna.Study | None) -> ImportanceInfo:
    """fANOVA importances over the study's complete trials (optuna's default evaluator)."""
    import optuna

    if study is None:
        return ImportanceInfo(study_id, (), (), "no optuna study is linked to this study")
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < MIN_TRIALS:
        return ImportanceInfo(study_id, (), (), f"{len(complete)} complete trial(s); "
                                                f"importance needs at least {MIN_TRIALS}")
    try:
        importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as exc:
        return ImportanceInfo(study_id, (), (), f"optuna could not rank parameters: {exc}")
    if not importances:
        return ImportanceInfo(study_id, (), (), "no parameter varied across complete trials")
    ranked = sorted(importances.items(), key=lambda item: item[1])
    return ImportanceInfo(study_id, tuple(p for p, _ in ranked),
                          tuple(float(v) for _, v in ranked), None)


def build_importance_figure(info: ImportanceInfo) -> Any:
    """Horizontal bars, most important on top: thick line segments from 0 (the page's plotly
    bundle has scatter traces, no bar traces), each value written at its end."""
    go = graph_objects()
    xs: list[float | None] = []
    ys: list[str | None] = []
    for param, value in zip(info.params, info.importances, strict=True):
        xs += [0.0, value, None]
        ys += [param, param, None]
    fig = go.Figure([
        go.Scatter(x=xs, y=ys, mode="lines", line={"width": 22, "color": "#636efa"},
                   hoverinfo="skip", meta="bars"),
        go.Scatter(x=info.importances, y=info.params, mode="text",
                   text=[f" {v:.2f}" for v in info.importances], textposition="middle right",
                   hovertemplate="%{y}: %{x:.3f}<extra></extra>", meta="values"),
    ])
    fig.update_layout(title={"text": f"parameter importance (study {info.study_id})"},
                      xaxis={"title": "importance (fANOVA)", "range": [0, 1.1]},
                      yaxis={"type": "category"}, showlegend=False, height=340,
                      margin={"t": 50})
    return fig
