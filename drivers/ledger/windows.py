"""The ledger's time axis: reservations and what holds capacity over a window.

`LedgerWindows` turns the rows into spans over time (drivers.ledger.timeline): allocations until
their expiry, `RESERVED` rows (`alloc --at`) over their windows. It answers what fits over
a window, when capacity comes back, which reservations are still to be claimed, and claims
one (RESERVED -> ALLOCATING). Part of `drivers.ledger.book.Ledger`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from drivers.ledger.db import LedgerDb
from drivers.ledger.rows import (
    ALLOCATING,
    FREED,
    LAPSED,
    RESERVED,
    Allocation,
    stamp,
    unstamp,
)
from drivers.ledger.store import HOLDS_SQL, LOCAL_SETTLED_SQL, TOTALS, LedgerStore
from providers.core.usage import AllocationUsage

if TYPE_CHECKING:
    from drivers.ledger.db import Conn
    from drivers.ledger.timeline import Fit, Span
    from drivers.spec.types import Resources

CANCELLED = "reservation cancelled"  # the note of a reservation `free` cancelled


class LedgerWindows(LedgerStore):
    def active_local_usage(self) -> list[AllocationUsage]:
        """Usage grouped by driver and expiry (SQLite sums; a big ledger stays cheap), then
        the reservations still to be claimed (`starts` set: they hold from then)."""
        settled = self._db.query(
            "SELECT driver, SUM(cpu), SUM(ram), expires FROM allocations "
            f"WHERE status IN {LOCAL_SETTLED_SQL} AND {self._local} "
            "GROUP BY driver, expires"
        )
        in_flight = self._db.query(
            "SELECT driver, cpu, ram, expires, owner_pid, owner_start, owner_host, lease "
            f"FROM allocations WHERE status = 'ALLOCATING' AND {self._local}"
        )
        rows = [(d, c, r, e) for d, c, r, e in settled] + [
            (d, c, r, e)
            for d, c, r, e, pid, started, host, lease in in_flight
            # An allocation whose shoal died mid-way holds nothing, even before cleanup.
            if self.alive(host, pid, started, lease)
        ]
        return [
            AllocationUsage(driver=d, cpu=c, ram_gib=r, expires=unstamp(e) if e else None)
            for d, c, r, e in rows
        ] + self.reservations()

    def reservations(self) -> list[AllocationUsage]:
        """Local reservations still to be claimed, each holding from its window's start."""
        rows = self._db.query(
            "SELECT driver, cpu, ram, expires, starts, id FROM allocations "
            f"WHERE status=? AND {self._local} AND claim_by > ? ORDER BY starts, id",
            (RESERVED, stamp(self.clock())),
        )
        return [
            AllocationUsage(
                driver=d, cpu=c, ram_gib=r, expires=unstamp(e), starts=unstamp(st), label=i
            )
            for d, c, r, e, st, i in rows
        ]

    # -- windows -------------------------------------------------------------------------

    def node_usage(self, remote_driver: str | None = None) -> Resources:
        """What a pool's holding rows hold now. On a team ledger from the same grouped read
        as `_spans` (`_held`): a dry run then scans the holding rows once, not twice."""
        if not self.team:
            return super().node_usage(remote_driver)
        from drivers.spec.types import Resources

        groups = self._db.read(lambda conn: self._held(conn, remote_driver))
        if not groups:
            return Resources()
        return Resources(
            cpu=sum(g[1] for g in groups),
            ram=sum(g[2] for g in groups),
            multitenancy=bool(min(g[4] for g in groups)),
            cpu_overbook=bool(min(g[5] for g in groups)),
            ram_overbook=bool(min(g[6] for g in groups)),
        )

    def _held(self, conn: Conn, remote_driver: str | None) -> list[tuple[Any, ...]]:
        """The holding rows of a pool by expiry: (expires, cpu, ram, count, multitenancy,
        cpu_overbook, ram_overbook, first id), each flag the least of its rows'. SQLite's from
        its running totals; a team ledger's by `PgLedgerDb.kept`, so the command's next read
        of them (a dry run's usage, then its fit) is one lookup while nothing was written."""
        scope = self._scope(remote_driver)
        args: tuple[Any, ...] = () if remote_driver is None else (remote_driver,)
        if self._db.has(TOTALS):  # ('' is no expiry)
            return conn.execute(
                "SELECT NULLIF(expires, ''), SUM(cpu), SUM(ram), SUM(n), MIN(shared = n), "
                f"MIN(cpu_ob = n), MIN(ram_ob = n), MIN(first) FROM {TOTALS} WHERE {scope} "
                "GROUP BY expires",
                args,
            ).fetchall()
        held = (
            "SELECT expires, SUM(cpu), SUM(ram), COUNT(*), MIN(multitenancy), "
            "MIN(cpu_overbook), MIN(ram_overbook), MIN(id) FROM allocations "
            f"WHERE {HOLDS_SQL} AND {scope} GROUP BY expires"
        )
        if isinstance(self._db, LedgerDb):
            return conn.execute(held, args).fetchall()
        return self._db.kept(conn, held, args)

    def _spans(self, conn: Conn, remote_driver: str | None, now: datetime) -> list[Span]:
        """What holds capacity of this scope over time: allocations from now until their
        expiry (overdue or without one: until freed), reservations over their windows."""
        from drivers.ledger.timeline import Span

        scope = self._scope(remote_driver)
        args: tuple[Any, ...] = () if remote_driver is None else (remote_driver,)
        spans: list[Span] = []
        for expires, cpu, ram, count, multi, cpu_ob, ram_ob, first in self._held(
            conn, remote_driver
        ):
            end = unstamp(expires) if expires else None
            spans.append(
                Span(
                    cpu=cpu, ram=ram, count=count, multitenancy=bool(multi),
                    cpu_overbook=bool(cpu_ob), ram_overbook=bool(ram_ob),
                    end=end if end is not None and end > now else None, label=first,
                )
            )  # fmt: skip
        for row_id, starts, expires, cpu, ram, multi, cpu_ob, ram_ob in conn.execute(
            "SELECT id, starts, expires, cpu, ram, multitenancy, cpu_overbook, ram_overbook "
            f"FROM allocations WHERE status=? AND claim_by > ? AND {scope}",
            (RESERVED, stamp(now), *args),
        ):
            spans.append(
                Span(
                    cpu=cpu, ram=ram, multitenancy=bool(multi), cpu_overbook=bool(cpu_ob),
                    ram_overbook=bool(ram_ob), start=unstamp(starts), end=unstamp(expires),
                    label=row_id, reserved=True,
                )
            )  # fmt: skip
        return spans

    def fit_window(
        self,
        fits: Callable[[Resources], int],
        *,
        remote_driver: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> Fit:
        """How many fit over [start, end) (default: from now, until freed), counting the
        reservations that overlap it; nothing is written."""
        from drivers.ledger.timeline import window_fit

        now = self.clock()
        begin = start or now
        if not self.exists:
            return window_fit([], begin, end, fits)
        spans = self._db.read(lambda conn: self._spans(conn, remote_driver, now))
        return window_fit(spans, begin, end, fits)

    def expected_back(
        self,
        fits: Callable[[Resources], int],
        life: timedelta | None,
        remote_driver: str | None = None,
    ) -> tuple[datetime, str] | None:
        """When a request of this lifetime next fits as local holdings end, and what ends."""
        from drivers.ledger.timeline import next_fit

        if not self.exists:
            return None
        now = self.clock()
        spans = self._db.read(lambda conn: self._spans(conn, remote_driver, now))
        return next_fit(spans, now, life, fits)

    def next_release(self) -> datetime | None:
        """The next time capacity comes back with nobody writing: an allocation's expiry or
        a reservation's claim deadline."""
        now = stamp(self.clock())
        rows = self._db.query(
            "SELECT MIN(t) FROM (SELECT MIN(expires) AS t FROM allocations WHERE "
            f"{HOLDS_SQL} AND expires > ? UNION ALL SELECT MIN(claim_by) FROM allocations "
            "WHERE status=? AND claim_by > ?) AS due",
            (now, RESERVED, now),
        )
        return unstamp(rows[0][0]) if rows and rows[0][0] else None

    # -- reservations ----------------------------------------------------------------------

    def claim(
        self,
        alloc_id: str,
        definition: dict[str, Any],
        metadata: dict[str, Any],
        fits: Callable[[Resources], int] | None = None,
        remote_driver: str | None = None,
    ) -> Allocation:
        """RESERVED -> ALLOCATING for this shoal, from its window's start until it lapses; the
        definition and metadata become the claim's. Anything else is refused with what the
        row is. With `fits` (the driver's check for its definition), a claim whose room is
        still held by allocations past their lifetime (still stopping) is refused (75)
        until they have ended."""
        from drivers.supervisor import procinfo

        pid, started = procinfo.self_identity()
        lease = self._lease()
        with self._write() as conn:
            now = stamp(self.clock())
            self._sweep(conn, now)  # a reservation past its claim deadline lapses first
            if fits is not None:
                held_by = self._in_the_way(conn, alloc_id, fits, remote_driver)
                if held_by:
                    raise self.still_held(alloc_id, held_by)
            moved = conn.execute(
                "UPDATE allocations SET status=?, updated=?, definition=?, metadata=?, "
                "owner_pid=?, owner_start=?, owner_host=?, lease=?, note=? "
                "WHERE id=? AND status=? AND starts <= ? AND claim_by > ?",
                (ALLOCATING, now, json.dumps(definition), json.dumps(metadata), pid, started,
                 self.host, lease, "claimed reservation", alloc_id, RESERVED, now, now),
            ).rowcount  # fmt: skip
        if not moved:
            raise self.unclaimable(self.get(alloc_id))
        return self.get(alloc_id)

    def in_the_way(
        self,
        alloc_id: str,
        fits: Callable[[Resources], int],
        remote_driver: str | None = None,
    ) -> list[str]:
        """The allocations past their lifetime that still hold a reservation's room (their
        workloads are being stopped): its claim waits for them (a read)."""
        if not self.exists:
            return []
        return self._db.read(lambda conn: self._in_the_way(conn, alloc_id, fits, remote_driver))

    def _in_the_way(
        self,
        conn: Conn,
        alloc_id: str,
        fits: Callable[[Resources], int],
        remote_driver: str | None = None,
    ) -> list[str]:
        """A reservation's room is booked beside everything that holds capacity during its
        window; what it was not booked beside is what should have ended by its start:
        allocations past their lifetime. While such an allocation still holds (its workload
        in its SIGTERM grace, a `free` still stopping it) and the booked room does not fit
        beside it, the claim would run two workloads on one room."""
        from drivers.ledger.timeline import usage_at

        if remote_driver is None:  # the booking's own pool: a team driver's, or this machine's
            booked = conn.execute(
                "SELECT driver FROM allocations WHERE id=? AND is_remote = 1", (alloc_id,)
            ).fetchone()
            remote_driver = booked[0] if booked else None
        now = self.clock()
        args: tuple[Any, ...] = () if remote_driver is None else (remote_driver,)
        overdue = [
            str(row[0])
            for row in conn.execute(
                f"SELECT id FROM allocations WHERE {HOLDS_SQL} AND {self._scope(remote_driver)} "
                "AND expires IS NOT NULL AND expires <= ? ORDER BY expires, id",
                (*args, stamp(now)),
            )
        ]
        if not overdue:
            return []
        others = [
            span
            for span in self._spans(conn, remote_driver, now)
            if not (span.reserved and span.label == alloc_id)
        ]
        return [] if fits(usage_at(others, now)) >= 1 else overdue

    def still_held(self, alloc_id: str, held_by: list[str]) -> Exception:
        from providers.core.errors import NoCapacityError

        names = ", ".join(held_by[:3])
        if len(held_by) > 3:
            names += f" and {len(held_by) - 3} more"
        return NoCapacityError(
            f"reservation {alloc_id}: its room is still held by {names}, past its lifetime and "
            "being stopped; claim it once that has ended (--wait waits for it)"
        )

    def unclaimable(self, row: Allocation) -> Exception:
        """Why `alloc --reservation` cannot claim this row now."""
        from providers.core.errors import RetryableError, UsageError
        from providers.core.timeutil import human_duration
        from providers.core.wire import format_time

        if row.status == RESERVED and row.starts:
            begins = unstamp(row.starts)
            return RetryableError(
                f"reservation {row.id} starts at {format_time(begins)} (in "
                f"{human_duration(begins - self.clock(), style='span')}); claim it from then "
                "(--wait waits)"
            )
        if row.status == LAPSED:
            return UsageError(f"reservation {row.id} lapsed: {row.note}; book another")
        if row.starts and row.status == FREED and row.note == CANCELLED:
            return UsageError(f"reservation {row.id} was cancelled ({row.updated}); book another")
        if row.starts:
            return UsageError(f"reservation {row.id} was already claimed (it is {row.status})")
        return UsageError(
            f"{row.id} is an allocation ({row.status}), not a reservation; reservations are "
            "RESERVED in `shoal status`"
        )
