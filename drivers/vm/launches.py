"""A cloud driver's launch notes: one small file per allocation whose launch request this
machine sent lately (`aws-launches/ID.json`, `gcp-inserts/ID.json` in the state dir),
written before the request goes out and again with what its answer named once it is read.
`place` is where it went: the aws driver's region, the gcp driver's zone.

They are what lets a later command tell "nothing was launched" from "the cloud does not
list it yet". For the gcp driver: an insert Google took has an operation in its zone from
then on, but one whose request was still on the wire when shoal died may be taken a
moment later. For the aws driver: DescribeInstances is eventually consistent: an instance
just launched may be missing from a lookup by tag, and a lookup or TerminateInstances by
its id may answer InvalidInstanceID.NotFound, for a while (AWS's advice is to keep asking,
backing off, for up to about five minutes:
https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html). So an empty
answer is believed only when no note says a launch was sent within that window; a note
with ids lets the cleanup end them by id. An allocation never sent has no note (the
cleanup of an alloc killed while planning settles at once), and a note older than the
window says nothing an answer would not: such notes are removed.

Unlike the memo (a cache), these are state: a note that cannot be written stops the
launch before anything is sent.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from providers.core.errors import LedgerWriteError


class LeftForRecovery(KeyboardInterrupt):
    """Ctrl-C during a launch whose outcome the cleanup could not learn within its few
    seconds: the interrupt stands (130), and the allocation is not recorded as failed, so
    that the next command's recovery, which keeps looking, ends what it launched."""


@dataclass(frozen=True)
class Launch:
    place: str  # the region or zone it was sent to
    sent: float  # time.time() when the request was sent
    instances: tuple[str, ...] = ()  # what its answer said, once read

    def age(self) -> float:
        return time.time() - self.sent


class Launches:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, allocation_id: str) -> Path:
        return self.folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', allocation_id)}.json"

    def sent(self, allocation_id: str, place: str, *, window: float) -> None:
        """Noted before the request goes out (notes older than `window` are dropped)."""
        self._prune(window)
        self._write(allocation_id, Launch(place, time.time()))

    def answered(self, allocation_id: str, ids: list[str]) -> None:
        """The ids its answer gave: a cleanup can then end them by id. Only a help (a tag
        lookup finds them too), so a note that cannot be written is no failure."""
        found = self.get(allocation_id)
        if found is not None:
            with contextlib.suppress(LedgerWriteError):
                self._write(allocation_id, Launch(found.place, found.sent, tuple(ids)))

    def get(self, allocation_id: str) -> Launch | None:
        return _read(self._path(allocation_id))

    def young(self, allocation_id: str, window: float) -> Launch | None:
        """The allocation's launch when it was sent less than `window` seconds ago."""
        found = self.get(allocation_id)
        return found if found is not None and found.age() < window else None

    def forget(self, allocation_id: str) -> None:
        """Settled: what it launched is known ended, or it launched nothing."""
        with contextlib.suppress(OSError):
            self._path(allocation_id).unlink()

    def _write(self, allocation_id: str, launch: Launch) -> None:
        path = self._path(allocation_id)
        body = {"place": launch.place, "sent": launch.sent, "instances": list(launch.instances)}
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=".launch.", dir=self.folder)
            try:
                with os.fdopen(fd, "w") as out:
                    json.dump(body, out)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise LedgerWriteError(
                f"{path}: cannot note the launch of {allocation_id} ({exc.strerror or exc}); "
                "nothing was launched"
            ) from None

    def _prune(self, window: float) -> None:
        try:
            paths = list(self.folder.glob("*.json"))
        except OSError:
            return
        for path in paths:
            found = _read(path)
            if found is None or found.age() >= window:
                with contextlib.suppress(OSError):
                    path.unlink()


def _read(path: Path) -> Launch | None:
    try:
        data = json.loads(path.read_text())
        sent = data["sent"]
        place = data.get("place", data.get("region"))  # "region": an older shoal's
        ids = data.get("instances") or []
        if (
            isinstance(sent, (int, float))
            and math.isfinite(sent)
            and isinstance(place, str)
            and isinstance(ids, list)
            and all(isinstance(i, str) for i in ids)
        ):
            return Launch(place, float(sent), tuple(ids))
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return None
