"""A cloud driver's launch notes (drivers/vm/launches.py): young or old, what their answer
named, notes nobody could have written, and a note that cannot be written."""

from __future__ import annotations

from pathlib import Path

import pytest

from drivers.vm.launches import Launch, Launches
from providers.core.errors import LedgerWriteError


def test_launch_notes_say_which_launches_are_young(tmp_path: Path) -> None:
    notes = Launches(tmp_path / "aws-launches")
    notes.sent("aws-1", "eu-west-1", window=300)
    assert notes.young("aws-1", 300) == notes.get("aws-1")
    notes.answered("aws-1", ["i-1"])
    note = notes.get("aws-1")
    assert isinstance(note, Launch) and note.instances == ("i-1",) and note.place == "eu-west-1"
    assert notes.young("aws-1", 300) == note and notes.young("aws-1", 0) is None
    # A note nobody could have written (a time at the end of time, not a number, not JSON)
    # is no note: an empty answer is believed as it would be without one.
    for text in ('{"region": "x", "sent": Infinity}', '{"region": "x", "sent": "now"}', "[1]", "{"):
        (tmp_path / "aws-launches" / "aws-2.json").write_text(text)
        assert notes.get("aws-2") is None
    # Old notes go when a launch is noted; a settled one at once.
    (tmp_path / "aws-launches" / "aws-2.json").write_text('{"region": "x", "sent": 1}')
    notes.sent("aws-3", "us-east-1", window=300)
    assert sorted(p.name for p in (tmp_path / "aws-launches").iterdir()) == [
        "aws-1.json",
        "aws-3.json",
    ]
    notes.forget("aws-1")
    assert notes.get("aws-1") is None
    # A note that cannot be written stops the launch before anything is sent.
    (tmp_path / "not-a-dir").write_text("")
    with pytest.raises(LedgerWriteError, match="nothing was launched"):
        Launches(tmp_path / "not-a-dir" / "aws-launches").sent("aws-4", "us-east-1", window=300)


def test_a_note_of_an_older_shoal_names_its_region_as_the_place(tmp_path: Path) -> None:
    (tmp_path / "aws-1.json").write_text('{"region": "eu-west-1", "sent": 1e12}')
    note = Launches(tmp_path).get("aws-1")
    assert note is not None and note.place == "eu-west-1"
