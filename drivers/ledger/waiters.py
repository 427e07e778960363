"""The ledger's waiters queue: `alloc --wait` requests in arrival order, and serving them.

The `waiters` table holds one row per waiting shoal (arrival order = id) with its
doorbell's token (drivers.ledger.doorbell). `LedgerWaiters` queues and dequeues them, drops the
places of shoals that died waiting, tells who is ahead and who fits now (first come first
served), and rings the first live waiter of each driver after a write freed capacity.
Part of `drivers.ledger.book.Ledger`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from drivers.ledger.rows import stamp
from drivers.ledger.windows import LedgerWindows
from drivers.supervisor import procinfo

if TYPE_CHECKING:
    from drivers.ledger.db import Conn
    from drivers.ledger.timeline import Waiter
    from drivers.spec.types import Resources

# Decides whether a queued request fits beside a given node usage (the driver's capacity
# check for that waiter's definition): how a shoal judges the waiters ahead of it.
WaiterFits = Callable[["Waiter", "Resources"], int]


class LedgerWaiters(LedgerWindows):
    def enqueue(
        self,
        *,
        driver: str,
        definition: dict[str, Any],
        resources: Resources,
        life: timedelta | None,
        is_remote: bool,
        token: str,
        place: int | None = None,
    ) -> int:
        """Queue an `alloc --wait` (its arrival order is the id) with its doorbell's token.
        With `place`, a waiter keeps the place it had: its row gets this token, or comes
        back under the same id if it was dropped (it looked dead to another shoal)."""
        pid, started = procinfo.self_identity()
        lease = self._lease()
        with self._write() as conn:
            if place is not None:
                sql = "UPDATE waiters SET token=?, lease=? WHERE id=?"
                if conn.execute(sql, (token, lease, place)).rowcount:
                    return place
            # Without a place the id is the next in arrival order (never reused).
            key, mark = ("id, ", "?, ") if place is not None else ("", "")
            row = conn.execute(
                f"INSERT INTO waiters ({key}driver, definition, cpu, ram, multitenancy, "
                "cpu_overbook, ram_overbook, life_seconds, is_remote, token, owner_pid, "
                f"owner_start, created, host, lease) VALUES ({mark}?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?, ?, ?, ?) RETURNING id",
                (
                    *((place,) if place is not None else ()), driver, json.dumps(definition),
                    resources.cpu, resources.ram, int(resources.multitenancy),
                    int(resources.cpu_overbook), int(resources.ram_overbook),
                    life.total_seconds() if life else None, int(is_remote), token, pid,
                    started, stamp(self.clock()), self.host, lease,
                ),
            ).fetchone()  # fmt: skip
            return int(row[0])

    def queued(self, waiter: int) -> bool:
        """Whether this waiter still has its place."""
        return bool(self._db.query("SELECT 1 FROM waiters WHERE id=?", (waiter,)))

    def leave(self, waiter: int) -> None:
        """Leave the queue without allocating: those behind may fit now, so they are rung."""
        with self._write() as conn:
            if conn.execute("DELETE FROM waiters WHERE id=?", (waiter,)).rowcount:
                self._ring_pending = True

    _WAITER_COLUMNS = (
        "id, driver, definition, cpu, ram, multitenancy, cpu_overbook, ram_overbook, "
        "life_seconds, token, owner_pid, owner_start, host, lease"
    )

    @staticmethod
    def _waiter(row: tuple[Any, ...]) -> Waiter:
        from drivers.ledger.timeline import Waiter

        return Waiter(
            id=row[0], driver=row[1], definition=json.loads(row[2]), cpu=row[3], ram=row[4],
            multitenancy=bool(row[5]), cpu_overbook=bool(row[6]), ram_overbook=bool(row[7]),
            life=timedelta(seconds=row[8]) if row[8] else None, token=row[9],
            owner_pid=row[10], owner_start=row[11], host=row[12], lease=row[13],
        )  # fmt: skip

    def _waiters(self, conn: Conn, driver: str, before: int | None = None) -> list[Waiter]:
        sql = f"SELECT {self._WAITER_COLUMNS} FROM waiters WHERE driver=?{self._queue_scope}"
        args: tuple[Any, ...] = (driver,)
        if before is not None:
            sql += " AND id < ?"
            args += (before,)
        return [self._waiter(r) for r in conn.execute(sql + " ORDER BY id", args)]

    def _alive(self, waiter: Waiter) -> bool:
        return self.alive(waiter.host, waiter.owner_pid, waiter.owner_start, waiter.lease)

    def _drop_waiters(self, conn: Conn, dead: list[Waiter]) -> None:
        for waiter in dead:
            conn.execute("DELETE FROM waiters WHERE id=?", (waiter.id,))
            self._db.forget(waiter.token)
        if dead:
            self._ring_pending = True

    def _sweep_waiters(self) -> None:
        """Drop the queue places of shoals that died waiting (kill -9)."""
        rows = self._db.query(f"SELECT {self._WAITER_COLUMNS} FROM waiters")
        dead = [w for w in map(self._waiter, rows) if not self._alive(w)]
        if dead:
            with self._write() as conn:
                self._drop_waiters(conn, dead)

    def waiting(self, driver: str, before: int | None = None) -> list[Waiter]:
        """The queue of a driver, in arrival order (only those before `before`, if given)."""
        return self._db.read(lambda conn: self._waiters(conn, driver, before))

    def ahead(self, waiter: int, driver: str) -> int:
        """How many of its driver's waiters came before this one."""
        rows = self._db.query(
            f"SELECT COUNT(*) FROM waiters WHERE driver=?{self._queue_scope} AND id < ?",
            (driver, waiter),
        )
        return int(rows[0][0]) if rows else 0

    def leads(self, waiter: int, driver: str) -> bool:
        """Whether this waiter is first of its driver's queue, or the first is dead."""
        rows = self._db.query(
            "SELECT id, owner_pid, owner_start, host, lease FROM waiters "
            f"WHERE driver=?{self._queue_scope} ORDER BY id LIMIT 1",
            (driver,),
        )
        if not rows or rows[0][0] == waiter:
            return True
        pid, started, host, lease = rows[0][1:]
        return not self.alive(host, pid, started, lease)

    def served_now(
        self, driver: str, queue: WaiterFits, remote_driver: str | None = None
    ) -> list[Waiter]:
        """The waiters of a local driver that fit now, first come first served (a read)."""
        from drivers.ledger.timeline import serve_in_order

        def read(conn: Conn) -> list[Waiter]:
            now = self.clock()
            spans = self._spans(conn, remote_driver, now)
            served, _ = serve_in_order(self._waiters(conn, driver), spans, now, queue, self._alive)
            return served

        return self._db.read(read)

    def ring_waiters(self) -> None:
        """Wake the first live waiter of each driver; it works out who fits (and wakes them).
        A waiter that cannot be rung is dropped only if its process is gone; one that lives
        (its pipe deleted, or it polls) catches up on its own tick, and the next of its
        driver is rung as well."""
        from providers.core.errors import ShoalError

        rung: set[tuple[str, str | None]] = set()
        try:
            rows = self._db.query(
                "SELECT id, driver, token, owner_pid, owner_start, host, lease, is_remote "
                "FROM waiters ORDER BY id"
            )
            dead: list[tuple[int, str]] = []
            for waiter, driver, token, pid, started, host, lease, remote in rows:
                # One queue per team driver; a machine-scoped driver has one per machine.
                queue = (driver, None if remote or not self.team else host)
                if queue in rung:
                    continue
                # On a team ledger a ring cannot tell a dead waiter: its lease does, first.
                if self.team and not self.alive(host, pid, started, lease):
                    dead.append((waiter, token))
                elif self._db.ring(token):
                    rung.add(queue)
                elif not self.alive(host, pid, started, lease):
                    dead.append((waiter, token))  # and on to the next one of its driver
            if dead:
                with self._db.transaction() as conn:
                    for waiter, _ in dead:
                        conn.execute("DELETE FROM waiters WHERE id=?", (waiter,))
                for _, token in dead:
                    self._db.forget(token)
        except ShoalError:
            return  # a courtesy: the waiters' own slow tick catches up
