"""The in-memory index behind ``GET /v1/best`` and ``GET /v1/configs``.

Launchers ask the same few keys over and over, so answers are kept as ready response bytes: a
request that hits the index touches neither the database nor a serialiser. A background poller
(see ``api/_lifespan.py``) watches ``ResultStore.data_version()``, one indexed row read; when
it changes, :meth:`BestIndex.refresh` reloads the devices and the best configs of the problems
whose results changed since (``ResultStore.best_per_problem_since``: what the writes touched,
not every tuned problem, so a campaign writing all the time costs the server little),
recomputes the remembered answers whose bests changed, off the request path, and swaps
everything in at once. Every answer, a new query's included, is chosen from that snapshot by
the store's own exact-or-nearest rule (``xe2tune.db.best_among``: what ``ResultStore.best``
answers), so no request reads the database.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xe2tune.api.schemas import BestPublic
from xe2tune.db import (
    BestQuery,
    BestResult,
    DeviceRecord,
    ProblemGroup,
    best_among,
    best_order,
    export_json,
    names_device,
    problem_group,
)
from xe2tune.kernels import ProblemSpec

if TYPE_CHECKING:
    from xe2tune.db import Match, ResultStore

MAX_ANSWERS = 4096  # distinct queries remembered; the oldest is dropped beyond this
HINT_ITEMS = 8


@dataclass(frozen=True)
class Answer:
    """A finished HTTP answer: status code, JSON body bytes and the ASGI headers to send."""

    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers", (
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self.body)).encode()),
        ))


def _error(status: int, detail: str) -> Answer:
    return Answer(status, json.dumps({"detail": detail}).encode())


ProblemKey = tuple[int, ProblemSpec]  # (device id, problem): one tuned problem's best


def _problem_key(best: BestResult) -> ProblemKey:
    return (best.device_id, best.problem)


@dataclass
class _Snapshot:
    """Everything answered at one data version. Replaced, never changed, by a refresh; only
    ``answers``/``sources`` (under the index's lock) and ``configs`` grow on demand."""

    version: int
    devices: tuple[DeviceRecord, ...] = ()
    groups: dict[ProblemGroup, dict[ProblemKey, BestResult]] = field(default_factory=dict)
    answers: dict[BestQuery, Answer] = field(default_factory=dict)
    # the tuned problem a 200 answer names and how it matched the query
    sources: dict[BestQuery, tuple[ProblemKey, Match]] = field(default_factory=dict)
    configs: bytes | None = None  # made on the first /v1/configs of the snapshot

    def tuned(self) -> list[BestResult]:
        """Every tuned problem's best, in ``best_per_problem``'s order."""
        return sorted((b for group in self.groups.values() for b in group.values()),
                      key=best_order)

    def best(self, key: ProblemKey) -> BestResult | None:
        return self.groups.get(problem_group(key[1]), {}).get(key)

    def with_bests(self, version: int, devices: tuple[DeviceRecord, ...],
                   bests: list[BestResult]) -> _Snapshot:
        """The next snapshot: these bests added or replaced, answers still to be carried."""
        groups = dict(self.groups)
        for best in bests:
            key = problem_group(best.problem)
            if groups.get(key) is self.groups.get(key):  # copy a group once, on its change
                groups[key] = dict(self.groups.get(key, {}))
            groups[key][_problem_key(best)] = best
        return _Snapshot(version=version, devices=devices, groups=groups)


def _problem_words(group: ProblemGroup) -> str:
    mode, head_dim, head_dim_v, dtype, kv_dtype, causal = group
    return (f"head_dim={head_dim}" + (f" head_dim_v={head_dim_v}" if head_dim_v != head_dim
                                      else "")
            + f" dtype={dtype}" + (f" kv_dtype={kv_dtype}" if kv_dtype else "")
            + f" mode={mode} causal={str(causal).lower()}")


def _found(best: BestResult, match: Match, query: BestQuery) -> Answer:
    answered = best.model_copy(update={"match": match, "query": query})
    return Answer(200, BestPublic.from_result(answered).model_dump_json().encode())


class BestIndex:
    """Ready answers of ``/v1/best`` per query and of ``/v1/configs``, per data version.

    Thread-safety: :meth:`answer` may run on many threads at once; :meth:`refresh` runs on one
    (the poller) and replaces the whole snapshot atomically, so a reader sees one version.
    """

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._snapshot = _Snapshot(version=-1)
        self._refresh_lock = threading.Lock()
        self._answers_lock = threading.Lock()
        self._raw: dict[bytes, BestQuery] = {}

    def cached(self, query: BestQuery) -> Answer | None:
        """The remembered answer of a query, without computing anything."""
        return self._snapshot.answers.get(query)

    def alias(self, raw_query: bytes, query: BestQuery) -> None:
        """Remember that this exact query string parses to ``query`` (parsing never changes)."""
        with self._answers_lock:
            if len(self._raw) >= MAX_ANSWERS:
                self._raw.pop(next(iter(self._raw)))
            self._raw[raw_query] = query

    def cached_raw(self, raw_query: bytes) -> Answer | None:
        """The remembered answer of a query string seen and validated before, if any."""
        query = self._raw.get(raw_query)
        return None if query is None else self._snapshot.answers.get(query)

    def configs(self) -> bytes:
        """The ``export --format json`` document of every tuned problem, as bytes (made once
        per data version, blocking)."""
        snapshot = self._snapshot
        if snapshot.configs is None:  # two threads may both make it: the same bytes
            snapshot.configs = export_json(snapshot.tuned()).encode()
        return snapshot.configs

    def answer(self, query: BestQuery) -> Answer:
        """The answer of a query, chosen from the snapshot on a miss (no database read)."""
        snapshot = self._snapshot
        found = snapshot.answers.get(query)
        if found is not None:
            return found
        computed, source = self._compute(snapshot, query)
        if self._snapshot is snapshot:
            self._remember(snapshot, query, computed, source)
        return computed

    def refresh(self) -> bool:
        """Read what changed when the store's data version moved; True when it did
        (blocking). Costs what changed: the problems whose results the writes touched.

        Raises:
            StoreError: the database could not be read; the previous answers stay in place.
        """
        with self._refresh_lock:
            old = self._snapshot
            if self._store.data_version() == old.version:
                return False
            changed = self._store.best_per_problem_since(old.version)
            moved = [b for b in changed.bests if old.best(_problem_key(b)) != b]
            fresh = old.with_bests(changed.version, tuple(self._store.devices()), moved)
            moved_problems = {_problem_key(b) for b in moved}
            # a newly tuned problem may be nearer to a query of its group than its answer, and
            # may answer a query that had none
            grown = {problem_group(b.problem) for b in moved if old.best(_problem_key(b)) is None}
            same_devices = old.devices == fresh.devices
            with self._answers_lock:
                answers, sources = dict(old.answers), dict(old.sources)
            for query, answer in answers.items():
                source = sources.get(query)
                if not same_devices or query.group in grown or (source is None and grown):
                    self._remember(fresh, query, *self._compute(fresh, query))
                elif source is not None and source[0] in moved_problems:
                    # the same tuned problem answers it, with its new best
                    self._remember(fresh, query, _found(fresh.best(source[0]), source[1],
                                                        query), source)
                else:
                    self._remember(fresh, query, answer, source)
            self._snapshot = fresh
            return True

    def _remember(self, snapshot: _Snapshot, query: BestQuery, answer: Answer,
                  source: tuple[ProblemKey, Match] | None) -> None:
        with self._answers_lock:
            if len(snapshot.answers) >= MAX_ANSWERS:
                oldest = next(iter(snapshot.answers))
                snapshot.answers.pop(oldest)
                snapshot.sources.pop(oldest, None)
            snapshot.answers[query] = answer
            if source is not None:
                snapshot.sources[query] = source

    def _compute(self, snapshot: _Snapshot, query: BestQuery
                 ) -> tuple[Answer, tuple[ProblemKey, Match] | None]:
        if query.device is not None and not any(
            names_device(query.device, d.name, d.id) for d in snapshot.devices
        ):
            known = ", ".join(sorted({d.name for d in snapshot.devices})) or "none"
            return _error(404, f"no device {query.device!r} in the database; known: {known}"), None
        group = snapshot.groups.get(query.group, {}).values()
        names = sorted({b.device for b in group
                        if query.device is None
                        or names_device(query.device, b.device, b.device_id)})
        if query.device is None and len(names) > 1:
            return _error(422, "query parameter device: several devices have results for this "
                          "query (" + ", ".join(names) + "); accepted: one of these names or "
                          "ids"), None
        best = best_among(group, query)
        if best is None:
            return _error(404, self._not_tuned_hint(snapshot, query)), None
        return _found(best, best.match, query), (_problem_key(best), best.match)

    @staticmethod
    def _not_tuned_hint(snapshot: _Snapshot, query: BestQuery) -> str:
        where = f"device {query.device!r}" if query.device is not None else "any device"
        asked = _problem_words(query.group)
        tuned = sorted({
            _problem_words(key) for key, group in snapshot.groups.items()
            if any(query.device is None or names_device(query.device, b.device, b.device_id)
                   for b in group.values())
        })
        listed = "; ".join(tuned[:HINT_ITEMS]) + (" ..." if len(tuned) > HINT_ITEMS else "")
        search = (f"xe2tune search --head-dim {query.head_dim}"
                  + (f" --head-dim-v {query.head_dim_v}"
                     if query.head_dim_v not in (None, query.head_dim) else "")
                  + (f" --kv-dtype {query.kv_dtype}" if query.kv_dtype else "")
                  + f" --dtype {query.dtype} "
                  f"--mode {query.mode} --{'' if query.causal else 'no-'}causal")
        return (f"nothing tuned for {asked} on {where}; tuned: {listed or 'nothing yet'}; "
                f"tune it with `{search}`")
