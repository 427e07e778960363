"""The `gcp` driver's inserts over one run, and the cleanup of an allocation known only by
its id (a bare handle: the cleanup of an alloc interrupted by Ctrl-C, or of one killed with
`kill -9`, which the next command's recovery runs).

An insert Google took has an operation in its zone from then on, and its VM is listed only
once the operation started running: a VM whose insert is still PENDING is in no list and a
delete of it is a 404, and it appears a moment later. So a bare handle's cleanup asks the
zone's operations (every page of them), not only the labels: every insert of the
allocation's instance (its name is derived from the allocation id) must be DONE before the
name is deleted. Which zone: this run's insert, or the launch note (drivers/vm/launches.py,
`gcp-inserts/` in the state dir) written before the request went out and kept until the
allocation is settled. A note without an operation is in doubt while it is young (the
request may have been on the wire when shoal died: Google takes it a moment later); past
DOUBT_WINDOW_SECONDS it proves nothing was made. An insert operation not DONE is in doubt
however old its note.

The cleanup of this run's own insert (its allocate failed, or Ctrl-C ended it, while the
insert was under way) waits up to GRACE_SECONDS for it (interrupts held by its caller),
reading the zone's operations every POLL_SECONDS rather than following the operation with
zoneOperations.wait, which Google may hold for two minutes. What cannot be settled by then
is never called ended: after Ctrl-C it is left to the next command's recovery
(LeftForRecovery: exit 130, the row not recorded FAILED); after a failure the row is FAILED
and a warning names `shoal free ID`, which ends what shows later (end_leftovers). A
recovery asks once and keeps the row ORPHANED while in doubt (InsertInDoubt, a
RetryableError); it asks again at the next command. An operation that could not be read
is no answer: in doubt, never "nothing was made".
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
# A note names the zone to look in for as long as its allocation is not settled (an orphan
# whose insert is PENDING for minutes, a FAILED row `free` ends the leftovers of): kept
# that long, not only through the doubt window.
KEEP_NOTES_SECONDS = 7 * 86400.0
GRACE_SECONDS = 10.0
POLL_SECONDS = 0.5
MAX_PAGES = 100  # of the zone's insert operations (500 a page)


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
        self._notes.sent(allocation_id, zone, window=KEEP_NOTES_SECONDS)
        sent = self._sent[allocation_id] = Sent(zone)
        sent.op = compute.insert(zone, body, rid)
        return sent.op

    def interrupted(self, allocation_id: str) -> None:
        """Ctrl-C ended its allocate: what its cleanup cannot settle is left to recovery."""
        self._interrupted.add(allocation_id)

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
        """Wait for every insert of `name` in its zone to be DONE: the zone to delete `name`
        in ("" when no insert was sent). InsertInDoubt or LeftForRecovery when what the
        insert made cannot be known yet (see the module)."""
        zone = self.zone_of(allocation_id)
        if not zone:
            return ""
        sent = self._sent.get(allocation_id)
        if sent is not None and sent.known:
            return zone
        deadline = time.monotonic() + (GRACE_SECONDS if sent is not None else 0.0)
        while True:
            try:
                pending = self._pending(compute, allocation_id, zone, name, sent)
            except ShoalError as exc:
                pending, why = None, f"its zone's operations could not be read ({exc})"
            else:
                why = (
                    f"its insert in {zone} is not done yet"
                    if pending
                    else "an insert was sent but Google shows no operation for it yet"
                )
            if pending == []:
                return zone
            if time.monotonic() + POLL_SECONDS > deadline:
                break
            time.sleep(POLL_SECONDS)
        if allocation_id in self._interrupted:
            self._warn(
                f"{allocation_id}: interrupted while inserting its VM, and what the insert "
                f"made is not known yet ({why}); the next shoal command looks again and "
                "deletes it"
            )
            raise LeftForRecovery
        if sent is not None:
            self._warn(
                f"{allocation_id}: what its insert made is not known yet ({why}); `shoal "
                f"free {allocation_id}` deletes its VM once it shows (`shoal status --remote "
                "gcp` lists them)"
            )
        raise InsertInDoubt(f"{allocation_id}: {why}; shoal asks again at its next command")

    def _pending(
        self, compute: Compute, allocation_id: str, zone: str, name: str, sent: Sent | None
    ) -> list[dict[str, Any]] | None:
        """The inserts of `name` in `zone` not DONE yet; None while an insert noted lately
        shows no operation at all."""
        ops = self._inserts_of(compute, zone, name)
        if not ops and sent is not None and sent.op is not None:
            # This run holds its operation: read it by its name.
            ops = [compute.call("GET", f"zones/{zone}/operations/{sent.op.get('name', '')}")]
        if not ops:
            note = self._notes.young(allocation_id, DOUBT_WINDOW_SECONDS)
            return None if note is not None else []
        return [op for op in ops if op.get("status") != "DONE"]

    @staticmethod
    def _inserts_of(compute: Compute, zone: str, name: str) -> list[dict[str, Any]]:
        """The zone's insert operations of `name`, from every page: the list is oldest
        first, 500 a page, and a busy zone keeps more than that."""
        found: list[dict[str, Any]] = []
        token = ""
        for _ in range(MAX_PAGES):
            params = {"filter": "operationType = insert"}
            if token:
                params["pageToken"] = token
            page = compute.call("GET", f"zones/{zone}/operations", params=params)
            found += [
                op
                for op in page.get("items") or []
                if str(op.get("targetLink", "")).endswith(f"/instances/{name}")
            ]
            token = str(page.get("nextPageToken") or "")
            if not token:
                return found
        raise ShoalError(f"{zone}: more than {MAX_PAGES} pages of insert operations")
