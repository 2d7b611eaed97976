"""This search process's lease in the results store, and who else is still alive.

Two searches of one problem share the optuna study and the database. Each holds a lease
(owner id, host, pid, expiry) renewed by a heartbeat thread; the configs it measures are
reserved under that lease, and the optuna trials it asks are marked with its owner id. A holder
is dead when its lease expired (any host) or, on this host, when its pid is gone: a search
killed with SIGKILL is known dead at once by the next search on the same machine, and after
``ttl_s`` by one elsewhere.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import TracebackType

from xe2tune.db import LeaseRecord, SqlCoordination
from xe2tune.errors import StoreError

HEARTBEAT_S = 5.0
LEASE_TTL_S = 60.0  # a silent holder on another host is dead after this long


def _now() -> datetime:
    return datetime.now(timezone.utc)


def pid_running(pid: int) -> bool:
    """True while a process with this pid exists on this host and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a killed child its parent has not reaped yet is a zombie: dead for our purposes
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


class SearchLease:
    """The lease of this process; a context manager that holds it and renews it on a thread.

    Thread-safety: ``owner``, ``is_live`` and ``live_owners`` may be called from any thread;
    the heartbeat thread only renews the lease. ``__exit__`` releases the lease and with it every
    reservation still held (the optuna trials still marked with the owner become stale).
    """

    def __init__(self, coordination: SqlCoordination, *, ttl_s: float = LEASE_TTL_S,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.coordination = coordination
        self.host = socket.gethostname()[:255]
        self.pid = os.getpid()
        self.owner = f"{self.pid}-{uuid.uuid4().hex[:12]}@{self.host}"[:64]
        self._ttl = timedelta(seconds=ttl_s)
        self._heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        """Renew the lease (the heartbeat thread does, every ``heartbeat_s``)."""
        self.coordination.hold_lease(LeaseRecord(owner=self.owner, host=self.host, pid=self.pid,
                                          expires_at=_now() + self._ttl))

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self._heartbeat_s):
            try:
                self.beat()
            except StoreError:
                continue  # a locked database: the next beat retries well within the ttl

    def __enter__(self) -> SearchLease:
        self.beat()
        self._thread = threading.Thread(target=self._beat_until_stopped, name="xe2tune-lease",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.coordination.release_leases([self.owner])

    def _alive(self, lease: LeaseRecord, now: datetime) -> bool:
        if lease.expires_at <= now:
            return False
        return lease.host != self.host or pid_running(lease.pid)

    def live_owners(self) -> set[str]:
        """Owners of live leases (this one included); dead leases are released on the way.

        Raises:
            StoreError: the database failed.
        """
        now = _now()
        leases = self.coordination.leases()
        dead = [lease.owner for lease in leases if not self._alive(lease, now)]
        if dead:
            self.coordination.release_leases(dead)
        return {lease.owner for lease in leases} - set(dead)

    def is_live(self, owner: str) -> bool:
        """True when ``owner``'s lease is live (releasing it when it is not).

        Raises:
            StoreError: the database failed.
        """
        return owner in self.live_owners()
