"""The `gcp` driver's inserts over one run, and the cleanup of an allocation known only by
its id (a bare handle: the cleanup of an alloc interrupted by Ctrl-C, or of one killed with
`kill -9`, which the next command's recovery runs).

An insert Google took has an operation in its zone from then on, and its VM is listed only
once the operation started running: a VM whose insert is still PENDING is in no list and a
delete of it is a 404, and it appears a moment later. So a bare handle's cleanup asks the
zone's operations, not only the labels: every insert of the allocation's instance (its
name is derived from the allocation id) is followed to DONE before the name is deleted.
Which zone: this run's insert, or the launch note (drivers/vm/launches.py, `gcp-inserts/`
in the state dir) written before the request went out. A note without an operation is in
doubt while it is young (the request may have been on the wire when shoal died: Google
takes it a moment later); past DOUBT_WINDOW_SECONDS it proves nothing was made.

What cannot be settled now is never called ended: after Ctrl-C, the cleanup waits up to
GRACE_SECONDS (interrupts held by its caller) and otherwise leaves the allocation to the
next command's recovery (LeftForRecovery: exit 130, the row not recorded FAILED); a
recovery keeps the row ORPHANED (InsertInDoubt, a RetryableError) and asks again next time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drivers.vm.launches import Launches, LeftForRecovery
from providers.core.errors import RetryableError, ShoalError

if TYPE_CHECKING:
    from drivers.gcp.compute import Compute

FOLDER = "gcp-inserts"
DOUBT_WINDOW_SECONDS = 60.0
GRACE_SECONDS = 10.0
POLL_SECONDS = 0.5


class InsertInDoubt(RetryableError):
    """An insert of the allocation was sent lately (or is not DONE) and what it made cannot
    be known yet: nothing is said ended. A recovery keeps the row ORPHANED; ask again."""


@dataclass
class Sent:
    zone: str
    op: dict[str, Any] | None = None  # the insert's operation, once Google answered
    known: bool = False  # its outcome is known: DONE (made or failed) or refused


class Inserts:
    def __init__(self, notes: Launches, warn: Callable[[str], None]) -> None:
        self._notes = notes
        self._warn = warn
        self._sent: dict[str, Sent] = {}  # allocation id -> its latest insert in this run
        self._interrupted: set[str] = set()  # Ctrl-C ended their allocate

    # -- sending ---------------------------------------------------------------------------

    def insert(
        self, compute: Compute, zone: str, body: dict[str, Any], rid: str, allocation_id: str
    ) -> dict[str, Any]:
        """instances.insert, noted first (a note that cannot be written sends nothing)."""
        self._notes.sent(allocation_id, zone, window=DOUBT_WINDOW_SECONDS)
        sent = self._sent[allocation_id] = Sent(zone)
        op = self._guard(allocation_id, lambda: compute.insert(zone, body, rid))
        sent.op = op
        return op

    def follow(
        self, compute: Compute, op: dict[str, Any], seconds: float, where: str, allocation_id: str
    ) -> dict[str, Any]:
        return self._guard(allocation_id, lambda: compute.follow(op, seconds, where))

    def _guard(self, allocation_id: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            return call()
        except KeyboardInterrupt:
            self._interrupted.add(allocation_id)
            raise

    def known(self, allocation_id: str) -> None:
        """The latest insert's outcome is known (DONE, or refused before any operation)."""
        sent = self._sent.get(allocation_id)
        if sent is not None:
            sent.known = True

    def settled(self, allocation_id: str) -> None:
        """The allocation holds its VM, or made none: its note says nothing any more."""
        self._notes.forget(allocation_id)

    # -- a bare handle's cleanup -------------------------------------------------------------

    def zone_of(self, allocation_id: str) -> str:
        """Where its latest insert went ("" when none was sent, here or by a dead shoal)."""
        sent = self._sent.get(allocation_id)
        if sent is not None:
            return sent.zone
        note = self._notes.get(allocation_id)
        return note.place if note is not None else ""

    def settle(self, compute: Compute, allocation_id: str, name: str) -> str:
        """Follow every insert of `name` in its zone to DONE: the zone to delete `name` in
        ("" when no insert was sent). InsertInDoubt or LeftForRecovery when what the insert
        made cannot be known yet (see the module)."""
        zone = self.zone_of(allocation_id)
        if not zone:
            return ""
        sent = self._sent.get(allocation_id)
        if sent is not None and sent.known:
            return zone
        interrupted = allocation_id in self._interrupted
        deadline = time.monotonic() + (GRACE_SECONDS if interrupted else 0.0)
        why = ""
        while True:
            try:
                pending = self._pending(compute, allocation_id, zone, name, sent)
            except ShoalError as exc:
                pending, why = None, f"its zone's operations could not be read ({exc})"
            if pending == []:
                return zone
            if pending is not None:
                why = ""
                for op in pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        why = f"its insert in {zone} is not done yet"
                        break
                    try:
                        compute.follow(op, left, f"{allocation_id}: {zone}")
                    except RetryableError:
                        why = f"its insert in {zone} is not done yet"
                    except ShoalError:  # DONE with an error: it made nothing, or its VM is gone
                        continue
                if not why:
                    return zone
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
        why = why or "an insert was sent but Google shows no operation for it yet"
        if interrupted:
            self._warn(
                f"{allocation_id}: interrupted while inserting its VM, and what the insert "
                f"made is not known yet ({why}); the next shoal command looks again and "
                "deletes it"
            )
            raise LeftForRecovery
        raise InsertInDoubt(f"{allocation_id}: {why}; shoal asks again at its next command")

    def _pending(
        self, compute: Compute, allocation_id: str, zone: str, name: str, sent: Sent | None
    ) -> list[dict[str, Any]] | None:
        """The inserts of `name` in `zone` not DONE yet; None while an insert noted lately
        shows no operation at all."""
        ops = [
            op
            for op in compute.operations_of(zone, "insert")
            if str(op.get("targetLink", "")).endswith(f"/instances/{name}")
        ]
        if not ops and sent is not None and sent.op is not None:
            ops = [sent.op]  # this run holds its operation: follow it by its own name
        if not ops:
            note = self._notes.young(allocation_id, DOUBT_WINDOW_SECONDS)
            return None if note is not None else []
        return [op for op in ops if op.get("status") != "DONE"]
