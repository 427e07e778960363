"""What a capacity read sums (`node_usage`, `fit_window`) on both backends, how often a team
ledger scans the holding rows for a dry run (once: the second read is the first's while
nothing was written), and the listing's JSON text as the Python path writes it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources
from tests.drivers.ledger.test_ledger import raw, reserve

pytestmark = pytest.mark.usefixtures("ledger_backend")

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    (tmp_path / "state").mkdir()
    return tmp_path / "state" / "ledger.sqlite"


@pytest.fixture
def ledger(path: Path, make_ledger: Callable[..., Ledger]) -> Ledger:
    return make_ledger(path, clock=lambda: NOW)


def book(ledger: Ledger, cpu: int, *, flags: bool, expires: datetime | None = None) -> str:
    alloc_id: str = ledger.reserve(
        driver="test/default",
        definition={},
        resources=Resources(
            cpu=cpu, ram=2 * cpu, multitenancy=flags, cpu_overbook=flags, ram_overbook=flags
        ),
        metadata={},
        is_remote=False,
        expires=expires,
        fits=lambda usage: 1,
    )
    return alloc_id


def direct_sums(ledger: Ledger, remote_driver: str | None = None) -> Resources:
    """The sums as one aggregate over the holding rows reads them (LedgerStore._usage)."""
    return ledger._db.read(lambda conn: ledger._usage(conn, remote_driver))


def test_node_usage_is_what_the_holding_rows_of_its_pool_sum_to(
    ledger: Ledger, path: Path, make_ledger: Callable[..., Ledger]
) -> None:
    # Rows in three expiry groups, flags that differ between them, and rows that hold
    # nothing of this pool: a remote driver's, a FREEING one whose workload had expired,
    # a freed one, another machine's (on a team ledger).
    soon, later = NOW + timedelta(hours=1), NOW + timedelta(hours=2)
    book(ledger, 1, flags=True, expires=soon)
    book(ledger, 2, flags=True, expires=soon)
    book(ledger, 4, flags=False, expires=later)
    ended = book(ledger, 8, flags=True)
    freed = book(ledger, 16, flags=False)
    reserve(ledger, 32, 32, is_remote=True, driver="test/team")
    assert ledger.set_status(ended, L.FREEING, note=L.FREEING_FROM + L.EXPIRED)
    assert ledger.set_status(freed, L.FREED)
    if ledger.team:
        other = make_ledger(path, clock=lambda: NOW, host="host-b")
        book(other, 64, flags=True)

    usage = ledger.node_usage()
    assert usage == direct_sums(ledger)
    assert (usage.cpu, usage.ram, usage.multitenancy) == (7, 14, False)
    assert ledger.node_usage("test/team") == direct_sums(ledger, "test/team")
    assert ledger.node_usage("test/team").cpu == 32
    assert ledger.fit_window(lambda usage: 100 - usage.cpu).usage == usage


@pytest.mark.postgresql_only
def test_a_dry_runs_two_reads_scan_the_holding_rows_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.ledger.pg import Translated

    for cpu in (1, 2, 3):
        book(ledger, cpu, flags=True)
    sent: list[str] = []
    execute = Translated.execute

    def recorded(self: Translated, sql: str, parameters: Any = (), /) -> Any:
        sent.append(sql)
        return execute(self, sql, parameters)

    monkeypatch.setattr(Translated, "execute", recorded)
    usage = ledger.node_usage()  # what service.dry_run reads, in its order
    fit = ledger.fit_window(lambda usage: 10 - usage.cpu)
    sums = [sql for sql in sent if "SUM(cpu)" in sql and "FROM allocations" in sql]
    assert len(sums) == 1, sent
    assert (usage.cpu, fit.count) == (6, 4)


@pytest.mark.postgresql_only
def test_a_write_from_another_session_between_two_reads_is_seen_by_the_second(
    ledger: Ledger, path: Path, make_ledger: Callable[..., Ledger]
) -> None:
    book(ledger, 1, flags=True)
    assert ledger.node_usage().cpu == 1
    other = make_ledger(path, clock=lambda: NOW, host="host-a")  # this machine, another shoal
    made = book(other, 2, flags=True)
    assert ledger.fit_window(lambda usage: 10 - usage.cpu).usage.cpu == 3
    raw(ledger, "UPDATE allocations SET cpu = 5 WHERE id = ?", (made,))  # by hand, psql
    assert ledger.node_usage().cpu == 6
    other.set_status(made, L.FREED)
    assert ledger.fit_window(lambda usage: 10 - usage.cpu).usage.cpu == 1
    assert ledger.node_usage().cpu == 1


@pytest.mark.postgresql_only
def test_a_read_inside_a_write_that_rolled_back_is_never_taken_for_a_later_one(
    ledger: Ledger,
) -> None:
    """A write's reads see its uncommitted rows and change counter: were one kept, a later
    read finding the counter at the same value (another session's one statement) would
    take rows that were never committed."""
    made = book(ledger, 1, flags=True)
    assert ledger.node_usage().cpu == 1
    with pytest.raises(RuntimeError), ledger._write() as conn:
        conn.execute("UPDATE allocations SET cpu = 50 WHERE id = ?", (made,))
        assert ledger._spans(conn, None, NOW)[0].cpu == 50
        raise RuntimeError("rolled back")
    raw(ledger, "UPDATE allocations SET cpu = 3 WHERE id = ?", (made,))  # one statement
    assert ledger.node_usage().cpu == 3
    assert ledger.fit_window(lambda usage: 10 - usage.cpu).usage.cpu == 3


# -- the listing's JSON text -------------------------------------------------------------------

TRICKY = [
    '{"lone": "\\ud800", "pair": "\\ud83d\\ude00", "deep": [[[[{"x": [0.1, -0, 1E2]}]]]]}',
    '{"n": "caf\\u00e9", "raw": "caf\u00e9 \u2603 \x7f", "tab": "a\\tb"}',
    '{"big": 123456789012345678901234567890, "f": [1e16, 1e-07, 0.1, -0.0, 2.5e300, 1e400]}',
    '{"nan": NaN, "inf": [Infinity, -Infinity]}',
    '{"dup": 1, "dup": 2, "nested": {"authentication": {"token": "x"}}}',
    '["not", "an", "object"]',
    "{bad",
    "\ufeff{}",
    "null",
    '  {"spaced" :  true }  ',
]


def expected_text(row: dict[str, Any]) -> str:
    """The listing's object as json.dumps writes it, every JSON column decoded by json.loads
    (what the Python path has always written: byte for byte)."""

    def value(text: str | None) -> Any:
        try:
            return None if text is None else json.loads(text)
        except ValueError:
            return None

    def public(text: str | None) -> Any:
        found = value(text)
        if not isinstance(found, dict):
            return None
        return {k: v for k, v in found.items() if k != "authentication"}

    shown = {
        **{k: row[k] for k in ("id", "driver", "status", "cpu", "ram", "created", "expires")},
        **{k: row[k] for k in ("updated", "starts", "claim_by", "host", "note")},
        "metadata": value(row["metadata"]),
        "definition": public(row["definition"]),
        "resource": public(row["state"]),
        "driver_status": None,
        "drift": None,
        "detail": None,
    }
    return json.dumps(shown, separators=(",", ":"))


@pytest.fixture
def tricky(ledger: Ledger) -> Iterator[list[str]]:
    """Live rows whose JSON columns hold what a hand edit might: non-ASCII, big numbers,
    NaN, duplicate keys, credentials, non-objects, broken JSON."""
    ids = []
    for i, text in enumerate(TRICKY):
        made = book(ledger, 1, flags=True)
        raw(
            ledger,
            "UPDATE allocations SET metadata = ?, definition = ?, state = ?, note = ?, "
            "status = 'ALLOCATED', created = ? WHERE id = ?",
            (text, text, None if i % 3 == 0 else text, f"n\u00f6te {i}\n", f"2030-{i:02}", made),
        )
        ids.append(made)
    yield ids


@pytest.mark.parametrize("decoder", ["json", "msgspec"])
def test_the_python_listing_writes_what_json_dumps_writes(
    ledger: Ledger, tricky: list[str], monkeypatch: pytest.MonkeyPatch, decoder: str
) -> None:
    """Byte for byte, whichever decodes the JSON columns (a long listing's msgspec)."""
    from drivers.ledger import store as S
    from drivers.ledger.rows import COLUMNS

    monkeypatch.setattr(S, "MSGSPEC_ROWS", 0 if decoder == "msgspec" else 10**9)
    if not ledger.team:  # SQLite builds the text itself unless it has no JSON functions
        monkeypatch.setattr(S, "LISTED_JSON", "no_such_json_function(id)")
        monkeypatch.setattr(S, "_NO_JSON", "no such function")
    columns = [c.strip() for c in COLUMNS.split(",")]
    rows = {
        r[0]: dict(zip(columns, r, strict=True))
        for r in raw(ledger, f"SELECT {COLUMNS} FROM allocations")
    }
    listed = ledger.summaries_json(include_ended=False)
    assert listed == [expected_text(rows[i]) for i in tricky]
    encoded = ledger.summaries(include_ended=False, encoded=True, metadata=True)
    assert [r["json"] for r in encoded] == listed
