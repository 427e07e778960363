"""The status use cases: one allocation checked against its driver (drift recorded),
listing the ledger's allocations (`Listing`: filter and order), a shared backend's list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from drivers.ledger import book as L
from drivers.ledger.book import Allocation
from drivers.service.context import Drivers, capacity, describe, resource_of, with_outcome
from drivers.service.recovery import recover
from drivers.spec.views import StatusView, Summary, remote_allocation
from providers.core.errors import LedgerWriteError, ShoalError, UsageError
from providers.core.wire import from_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from drivers.spec.base import ResourceDriver


def status(ctx: Drivers, alloc_id: str) -> StatusView:
    from drivers.spec.types import STATUS_ALLOCATED, STATUS_NONE

    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    view = describe(row)
    if row.status not in (L.ALLOCATED, L.GONE, L.EXPIRED, L.EXITED):
        return StatusView(view, detail=_recorded_outcome(row))
    if elsewhere(ctx, row):
        # Its workload runs on that machine (a process, a local container): only that
        # machine's driver can look at it. The ledger's row is what is known here.
        return StatusView(view, None, None, {"host": row.host, "seen": "only on its machine"})
    driver = ctx.driver(row.driver)
    try:
        seen = driver.status(resource_of(row))
    except ShoalError as exc:
        return StatusView(view, "ERROR", f"driver could not report status: {exc}")
    detail = _detail(driver, row)
    if row.status in (L.EXPIRED, L.EXITED):
        drift = None
        if seen == STATUS_ALLOCATED:
            drift = (
                f"ledger says {row.status} but the driver reports it running; "
                f"`shoal free {row.id}` ends it"
            )
        return StatusView(view, seen, drift, detail)
    if row.status == L.ALLOCATED and seen == STATUS_NONE:
        ended = _ended_by_itself(detail)
        try:
            if ended is not None:
                # Its supervisor could not record it (killed, or none for this driver): a
                # normal end all the same.
                note = _exit_note(ctx, ended, detail)
                moved = ctx.ledger.set_status(
                    row.id, L.EXITED, note=note, expect=(L.ALLOCATED,),
                    state=with_outcome(row, ended),
                )  # fmt: skip
                if moved:
                    view = replace(view, status=L.EXITED, note=note)
                return StatusView(view, seen, None, detail)
            ctx.ledger.set_status(row.id, L.GONE, note="driver reports NONE", expect=(L.ALLOCATED,))
        except LedgerWriteError as exc:
            drift = f"ledger says ALLOCATED but the driver reports NONE; not recorded: {exc}"
            return StatusView(view, seen, drift, detail)
        drift = "ledger said ALLOCATED but the driver reports NONE; marked GONE"
        return StatusView(replace(view, status=L.GONE), seen, drift, detail)
    if row.status == L.GONE and seen == STATUS_ALLOCATED:
        from drivers.spec.types import LabelDefinition

        definition = from_wire(LabelDefinition, row.definition, strict=False)
        # Back only if it fits: others may have taken its place while it was gone.
        if ctx.ledger.readmit(row.id, lambda usage: capacity(driver, usage, definition)):
            drift = "ledger said GONE but the driver reports it again; marked ALLOCATED"
            return StatusView(replace(view, status=L.ALLOCATED), seen, drift, detail)
        drift = (
            "ledger said GONE and the driver reports it again, but there is no capacity "
            f"for it now; it stays GONE: `shoal free {row.id}` releases it"
        )
        return StatusView(view, seen, drift, detail)
    return StatusView(view, seen, None, detail)


def elsewhere(ctx: Drivers, row: Allocation) -> bool:
    """Whether a row's workload lives on another machine of a team ledger and only that
    machine's driver can reach it (a machine-scoped driver: process, a local container)."""
    return not row.is_remote and not ctx.ledger.mine(row)


def _ended_by_itself(detail: dict[str, Any] | None) -> dict[str, Any] | None:
    """The outcome of a workload that ended on its own, from a driver's description (process:
    its supervisor's record; container: the engine's exit code; kubernetes: the pod's);
    None when it did not say it exited. An exit whose code nobody recorded (a process whose
    supervisor was killed) is still an exit, with the code unknown: its output is there."""
    if not detail or detail.get("state") != "exited" or detail.get("reason") == "expired":
        return None
    return {
        "exit_code": detail.get("exit_code"),
        "signal": detail.get("signal"),
        "ended": detail.get("finished"),
        "reason": detail.get("reason") or "exited",
    }


def _exit_note(ctx: Drivers, ended: dict[str, Any], detail: dict[str, Any] | None) -> str:
    from drivers.supervisor.supervise import exit_note

    if ended["exit_code"] is not None or ended["signal"]:
        return exit_note(ended)
    from providers.core.wire import format_time

    why = (detail or {}).get("message") or "nobody recorded it"
    when = ended["ended"] or format_time(ctx.ledger.clock())
    return f"exited by {when}, exit code unknown ({why})"


def _recorded_outcome(row: Allocation) -> dict[str, Any] | None:
    """How a freed workload ended, as `free` recorded it (drivers that keep an outcome)."""
    meta = (row.state or {}).get("metadata")
    outcome = meta.get("outcome") if isinstance(meta, dict) else None
    return outcome if isinstance(outcome, dict) else None


def _detail(driver: ResourceDriver, row: Allocation) -> dict[str, Any] | None:
    """What the workload is doing, from drivers that can tell (kubernetes: phase, reason)."""
    from drivers.spec.base import DescribesWorkload

    if not isinstance(driver, DescribesWorkload):
        return None
    try:
        return driver.describe(resource_of(row))
    except ShoalError as exc:
        return {"error": str(exc)}


def remote_allocations(ctx: Drivers, driver_name: str) -> list[dict[str, Any]]:
    """What a driver's shared backend holds for shoal, whichever machine made it (an
    optional driver method beyond the spec: kubernetes pods and jobs, engine containers),
    each as the allocation object: the driver's own fields in `detail`."""
    driver = ctx.driver(driver_name)
    from drivers.spec.base import ListsRemote

    if not isinstance(driver, ListsRemote):
        raise UsageError(
            f"driver {driver.name()} keeps no shared state to list; `shoal status` lists "
            "this machine's allocations"
        )
    return [remote_allocation(row) for row in driver.remote_allocations()]


SORT_KEYS = ("id", "driver", "status", "cpu", "ram", "created", "expires", "updated")

# `-l` selectors over an allocation's metadata, as kubectl's label selectors: KEY=VALUE (or
# ==), KEY!=VALUE, KEY in (A,B), KEY notin (A,B), KEY (present), !KEY (absent).
_LABEL_KEY = r"[^\s=!,()]+"
_LABEL_SET = re.compile(rf"^({_LABEL_KEY})\s+(in|notin)\s*\((.*)\)$")
_LABEL_CMP = re.compile(rf"^({_LABEL_KEY})\s*(==|!=|=)\s*(.*)$")
_LABEL_HAS = re.compile(rf"^(!?)\s*({_LABEL_KEY})$")
LABEL_HELP = "KEY=VALUE, KEY!=VALUE, KEY in (A,B), KEY notin (A,B), KEY (present), !KEY (absent)"


@dataclass(frozen=True)
class Label:
    """One metadata selector; values compare as text, exactly (metadata is text: `--meta`)."""

    key: str
    op: str  # "in", "notin", "exists", "absent"
    values: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> list[Label]:
        """`-l` text: one or more selectors, comma-separated outside parentheses."""
        out: list[Label] = []
        for token in _split_labels(text):
            if found := _LABEL_SET.match(token):
                values = tuple(v.strip() for v in found.group(3).split(","))
                out.append(cls(found.group(1), found.group(2), values))
            elif found := _LABEL_CMP.match(token):
                op = "notin" if found.group(2) == "!=" else "in"
                out.append(cls(found.group(1), op, (found.group(3).strip(),)))
            elif found := _LABEL_HAS.match(token):
                out.append(cls(found.group(2), "absent" if found.group(1) else "exists"))
            else:
                raise UsageError(f"-l {token!r}: use {LABEL_HELP}")
        if not out:
            raise UsageError(f"-l: empty selector; use {LABEL_HELP}")
        return out

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        if self.op in ("exists", "absent"):
            return (self.key in metadata) == (self.op == "exists")
        if self.key not in metadata:
            return self.op == "notin"  # as kubectl: KEY!=VALUE holds where KEY is absent
        value = metadata[self.key]
        text = value if isinstance(value, str) else json.dumps(value)
        return (text in self.values) == (self.op == "in")


def _split_labels(text: str) -> list[str]:
    parts: list[str] = []
    current, depth = "", 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p.strip() for p in [*parts, current] if p.strip()]


@dataclass(frozen=True)
class Listing:
    """Which allocations `status` lists, and in what order."""

    driver: str | None = None  # a driver (`test`) or an instance (`test/dev`)
    statuses: tuple[str, ...] = ()  # upper case; any status when empty
    sort: str | None = None  # a SORT_KEYS key, '-' first for descending
    labels: tuple[Label, ...] = ()  # every one must match the allocation's metadata

    @classmethod
    def parse(
        cls,
        driver: str | None,
        statuses: list[str] | None,
        sort: str | None,
        labels: list[str] | None = None,
    ) -> Listing:
        wanted = tuple(
            dict.fromkeys(s.strip().upper() for v in statuses or [] for s in v.split(",") if s)
        )
        unknown = [s for s in wanted if s not in L.ALL_STATUSES]
        if unknown:
            raise UsageError(
                f"--status {unknown[0]}: not a status; use {', '.join(L.ALL_STATUSES)}"
            )
        if sort is not None and sort.lstrip("-") not in SORT_KEYS:
            raise UsageError(f"--sort {sort!r}: use one of {', '.join(SORT_KEYS)}")
        selectors = tuple(one for text in labels or [] for one in Label.parse(text))
        return cls(driver or None, wanted, sort, selectors)

    def is_plain(self) -> bool:
        return self.driver is None and not self.statuses and self.sort is None and not self.labels

    def include(self, include_ended: bool) -> bool:
        """Whether the rows to read include ended ones: naming a status asks for it whether
        or not it has ended."""
        return include_ended or bool(self.statuses)

    def apply(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.driver:
            from drivers.registry import canonical

            # By the driver's own name: `container` finds what `--driver podman` made, and
            # what an older shoal recorded under an alias (`podman/default`).
            wanted = canonical(self.driver)
            exact = "/" in wanted
            rows = [
                r
                for r in rows
                if (
                    canonical(r["driver"]) == wanted
                    if exact
                    else canonical(r["driver"]).split("/")[0] == wanted
                )
            ]
        if self.statuses:
            rows = [r for r in rows if r["status"] in self.statuses]
        if self.labels:
            rows = [
                r for r in rows if all(one.matches(r.get("metadata") or {}) for one in self.labels)
            ]
        if self.sort:
            key = self.sort.lstrip("-")
            present = [r for r in rows if r.get(key) is not None]
            absent = [r for r in rows if r.get(key) is None]
            present.sort(key=lambda r: r[key], reverse=self.sort.startswith("-"))
            rows = present + absent  # unknowns last either way
        return rows


def _with_metadata(ctx: Drivers, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with each allocation's metadata, for `-l`: a row that does not carry it (a
    table's summary row) gets it from the ledger, in one read."""
    if all(isinstance(r.get("metadata"), dict) for r in rows):
        return rows
    found = {a.id: a.metadata for a in ctx.ledger.with_status(*L.ALL_STATUSES)}
    return [
        r if isinstance(r.get("metadata"), dict) else {**r, "metadata": found.get(r["id"], {})}
        for r in rows
    ]


def list_allocations(
    ctx: Drivers, *, include_ended: bool, listing: Listing | None = None
) -> list[Summary]:
    recover(ctx)
    listing = listing or Listing()
    rows = ctx.ledger.summaries(include_ended=listing.include(include_ended))
    if listing.labels:
        rows = _with_metadata(ctx, rows)
    return [Summary.from_json(r) for r in listing.apply(rows)]


def list_allocation_objects(
    ctx: Drivers, *, include_ended: bool, listing: Listing | None = None
) -> list[dict[str, Any]]:
    """The listed allocations as their JSON objects, filtered and ordered by `listing`."""
    return [json.loads(text) for text in _listed_json(ctx, include_ended, listing)]


def list_allocations_json(
    ctx: Drivers, *, include_ended: bool, listing: Listing | None = None
) -> list[str]:
    """Like list_allocations, each row its allocation object as JSON text, built by the
    ledger's SQLite: no row is decoded to be encoded again, filtered or not (100,000 rows
    stay a fraction of a second)."""
    return _listed_json(ctx, include_ended, listing)


def _listed_json(ctx: Drivers, include_ended: bool, listing: Listing | None) -> list[str]:
    recover(ctx)
    if listing is None or listing.is_plain():
        return ctx.ledger.summaries_json(include_ended=include_ended)
    # The summary fields to filter and order by (with the metadata `-l` reads), each beside
    # its SQL-built text: only the kept rows' texts are printed.
    rows = ctx.ledger.summaries(
        include_ended=listing.include(include_ended), encoded=True, metadata=bool(listing.labels)
    )
    return [r["json"] for r in listing.apply(rows)]
