"""The in-memory index behind ``GET /v1/best`` and ``GET /v1/configs``.

Launchers ask the same few keys over and over, so answers are kept as ready response bytes: a
request that hits the index touches neither the database nor a serialiser. A background poller
(see ``api/main.py``) watches ``ResultStore.data_version()``, one indexed row read; when it
changes, :meth:`BestIndex.refresh` reloads the devices and the best config of every tuned
problem, recomputes the remembered answers whose bests changed off the request path and swaps
everything in at once. Every answer, a new query's included, is chosen from that snapshot by
the store's own exact-or-nearest rule (``xe2tune.db.best_among``, what ``ResultStore.best``
answers), so no request reads the database: a lab's untuned keys cost microseconds, not a
query over their candidates' trials.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xe2tune.api.schemas import BestPublic
from xe2tune.db import BestQuery, BestResult, DeviceRecord, best_among, export_json, names_device

if TYPE_CHECKING:
    from xe2tune.db import ResultStore

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


@dataclass
class _Snapshot:
    version: int
    devices: tuple[DeviceRecord, ...] = ()
    tuned: tuple[BestResult, ...] = ()
    configs: bytes = b""
    answers: dict[BestQuery, Answer] = field(default_factory=dict)
    groups: dict[tuple[str, int, str, bool], list[BestResult]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.groups = _groups(self.tuned)


def _key(mode: str, head_dim: int, dtype: str, causal: bool) -> tuple[str, int, str, bool]:
    return (mode, head_dim, dtype, causal)


def _groups(tuned: tuple[BestResult, ...]) -> dict[tuple[str, int, str, bool],
                                                  list[BestResult]]:
    groups: dict[tuple[str, int, str, bool], list[BestResult]] = {}
    for best in tuned:
        p = best.problem
        groups.setdefault(_key(p.mode, p.head_dim, p.dtype, p.causal), []).append(best)
    return groups


def _problem_words(mode: str, head_dim: int, dtype: str, causal: bool) -> str:
    return f"head_dim={head_dim} dtype={dtype} mode={mode} causal={str(causal).lower()}"


class BestIndex:
    """Ready answers of ``/v1/best`` per query and of ``/v1/configs``, per data version.

    Thread-safety: :meth:`answer` may run on many threads at once; :meth:`refresh` runs on one
    (the poller) and replaces the whole snapshot atomically, so a reader sees one version.
    """

    def __init__(self, store: ResultStore) -> None:
        self._store = store
        self._snapshot = _Snapshot(version=-1, configs=export_json([]).encode())
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
        """The ``export --format json`` document of every tuned problem, as bytes."""
        return self._snapshot.configs

    def answer(self, query: BestQuery) -> Answer:
        """The answer of a query, computed through the store on a miss (blocking).

        Raises:
            StoreError: the database could not be read.
        """
        snapshot = self._snapshot
        found = snapshot.answers.get(query)
        if found is not None:
            return found
        computed = self._compute(snapshot, query)
        if self._snapshot is snapshot:
            self._remember(snapshot, query, computed)
        return computed

    def refresh(self) -> bool:
        """Reload when the store's data version changed; True when it did (blocking).

        Raises:
            StoreError: the database could not be read; the previous answers stay in place.
        """
        with self._refresh_lock:
            version = self._store.data_version()
            old = self._snapshot
            if version == old.version:
                return False
            tuned = tuple(self._store.best_per_problem())
            fresh = _Snapshot(version=version, devices=tuple(self._store.devices()), tuned=tuned,
                              configs=export_json(tuned).encode())
            same_devices = old.devices == fresh.devices
            for query, answer in list(old.answers.items()):
                key = _key(query.mode, query.head_dim, query.dtype, query.causal)
                # An answer depends only on the best configs of its (mode, D, dtype, causal)
                # group: most writes during a search change no best config, so most answers
                # carry over as they are.
                unchanged = same_devices and old.groups.get(key) == fresh.groups.get(key)
                fresh.answers[query] = (answer if unchanged and answer.status == 200
                                        else self._compute(fresh, query))
            self._snapshot = fresh
            return True

    def _remember(self, snapshot: _Snapshot, query: BestQuery, answer: Answer) -> None:
        with self._answers_lock:
            if len(snapshot.answers) >= MAX_ANSWERS:
                snapshot.answers.pop(next(iter(snapshot.answers)))
            snapshot.answers[query] = answer

    def _compute(self, snapshot: _Snapshot, query: BestQuery) -> Answer:
        if query.device is not None and not any(
            names_device(query.device, d.name, d.id) for d in snapshot.devices
        ):
            known = ", ".join(sorted({d.name for d in snapshot.devices})) or "none"
            return _error(404, f"no device {query.device!r} in the database; known: {known}")
        group = snapshot.groups.get(_key(query.mode, query.head_dim, query.dtype, query.causal),
                                    [])
        names = sorted({b.device for b in group
                        if query.device is None
                        or names_device(query.device, b.device, b.device_id)})
        if query.device is None and len(names) > 1:
            return _error(422, "query parameter device: several devices have results for this "
                          "query (" + ", ".join(names) + "); accepted: one of these names or ids")
        best = best_among(group, query)
        if best is None:
            return _error(404, self._not_tuned_hint(snapshot, query))
        return Answer(200, BestPublic.from_result(best).model_dump_json().encode())

    @staticmethod
    def _not_tuned_hint(snapshot: _Snapshot, query: BestQuery) -> str:
        where = f"device {query.device!r}" if query.device is not None else "any device"
        asked = _problem_words(query.mode, query.head_dim, query.dtype, query.causal)
        tuned = sorted({
            _problem_words(b.problem.mode, b.problem.head_dim, b.problem.dtype, b.problem.causal)
            for b in snapshot.tuned
            if query.device is None or names_device(query.device, b.device, b.device_id)
        })
        listed = "; ".join(tuned[:HINT_ITEMS]) + (" ..." if len(tuned) > HINT_ITEMS else "")
        search = (f"xe2tune search --head-dim {query.head_dim} --dtype {query.dtype} "
                  f"--mode {query.mode} --{'' if query.causal else 'no-'}causal")
        return (f"nothing tuned for {asked} on {where}; tuned: {listed or 'nothing yet'}; "
                f"tune it with `{search}`")
