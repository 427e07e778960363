"""Layers applied in order into one root: whiteouts, opaque directories, kinds replaced,
and the archive rules over the whole stack."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from drivers.image.extractor import Caps
from drivers.image.registry.layers import LayerExtractor
from drivers.image.tarstream import TarStream, UnsafeArchiveError

CAPS = Caps(max_bytes=10**9, max_entries=10_000)


def layer(*entries: tuple[str, str, str]) -> io.BytesIO:
    """A tar of (kind, name, data): kind f (file, data = content), d (dir), l (symlink,
    data = target), h (hardlink, data = target)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, data in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if kind == "f":
                raw = data.encode()
                info.size, info.mode = len(raw), 0o644
                tar.addfile(info, io.BytesIO(raw))
                continue
            info.type = {"d": tarfile.DIRTYPE, "l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE}[kind]
            info.mode = 0o755 if kind == "d" else 0o777
            info.linkname = data
            tar.addfile(info)
    out.seek(0)
    return out


def apply(root: Path, *layers: io.BytesIO) -> LayerExtractor:
    extractor = LayerExtractor(root, CAPS)
    try:
        for raw in layers:
            extractor.next_layer()
            tar = TarStream(raw)
            for member in tar.members():
                extractor.add(member, tar)
        extractor.finish()
    finally:
        extractor.close()
    return extractor


def tree(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "/"
        else:
            out[rel] = path.read_text()
    return out


def test_upper_layers_replace_and_whiteouts_delete(tmp_path: Path) -> None:
    apply(
        tmp_path,
        layer(
            ("d", "etc", ""),
            ("f", "etc/a", "1"),
            ("f", "etc/b", "2"),
            ("d", "var/lib/x", ""),
            ("f", "var/lib/x/data", "d"),
            ("f", "bin/sh", "sh"),
        ),
        layer(
            ("f", "etc/a", "one"),
            ("f", "etc/.wh.b", ""),
            ("f", "var/lib/.wh.x", ""),
            ("l", "bin/bash", "sh"),
        ),
    )
    assert tree(tmp_path) == {
        "bin": "/", "bin/bash": "-> sh", "bin/sh": "sh", "etc": "/", "etc/a": "one",
        "var": "/", "var/lib": "/",
    }  # fmt: skip


def test_an_opaque_directory_hides_what_is_below_but_keeps_its_own_layer(tmp_path: Path) -> None:
    apply(
        tmp_path,
        layer(
            ("d", "opt/app", ""),
            ("f", "opt/app/old", "o"),
            ("d", "opt/app/sub", ""),
            ("f", "opt/app/sub/deep", "x"),
        ),
        # The marker after an entry of its own layer: that entry stays.
        layer(
            ("f", "opt/app/new", "n"),
            ("f", "opt/app/.wh..wh..opq", ""),
            ("f", "opt/app/later", "l"),
        ),
    )
    assert tree(tmp_path) == {
        "opt": "/", "opt/app": "/", "opt/app/later": "l", "opt/app/new": "n",
    }  # fmt: skip


def test_kinds_replaced_across_layers(tmp_path: Path) -> None:
    apply(
        tmp_path,
        layer(("d", "a", ""), ("f", "a/inner", "i"), ("f", "b", "file"), ("l", "c", "b")),
        layer(("f", "a", "now a file"), ("d", "b", ""), ("f", "b/x", "x"), ("d", "c", "")),
    )
    assert tree(tmp_path) == {"a": "now a file", "b": "/", "b/x": "x", "c": "/"}


def test_a_hardlink_to_a_lower_layer_file_and_to_a_deleted_one(tmp_path: Path) -> None:
    apply(tmp_path, layer(("f", "lib/so", "elf")), layer(("h", "lib/so.1", "lib/so")))
    assert (tmp_path / "lib/so").stat().st_ino == (tmp_path / "lib/so.1").stat().st_ino
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(UnsafeArchiveError, match="does not point to a file unpacked before"):
        apply(
            other,
            layer(("f", "lib/so", "elf")),
            layer(("f", "lib/.wh.so", ""), ("h", "lib/so.1", "lib/so")),
        )


@pytest.mark.parametrize(
    "name", ["../.wh.etc", "etc/../../.wh.x", "/etc/.wh.passwd", "etc/.wh.", "etc/.wh.."]
)
def test_a_whiteout_never_deletes_outside_the_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "x"
    outside.write_text("keep")
    with pytest.raises(UnsafeArchiveError):
        apply(root, layer(("d", "etc", ""), ("f", "etc/passwd", "p")), layer(("f", name, "")))
    assert outside.read_text() == "keep"


def test_a_whiteout_never_deletes_through_a_link(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "file").write_text("keep")
    # A lower layer's symlink inside the root pointing inside the root; the whiteout path goes
    # through it: refused, nothing deleted anywhere.
    with pytest.raises(UnsafeArchiveError):
        apply(
            root,
            layer(("d", "real", ""), ("f", "real/file", "r"), ("l", "link", "real")),
            layer(("f", "link/.wh.file", "")),
        )
    assert (root / "real/file").read_text() == "r"
    assert (precious / "file").read_text() == "keep"


def test_read_only_lower_directories_can_be_whited_out(tmp_path: Path) -> None:
    ro = io.BytesIO()
    with tarfile.open(fileobj=ro, mode="w") as tar:
        info = tarfile.TarInfo("locked")
        info.type, info.mode = tarfile.DIRTYPE, 0o555
        tar.addfile(info)
        data = tarfile.TarInfo("locked/f")
        data.size = 1
        tar.addfile(data, io.BytesIO(b"x"))
    ro.seek(0)
    apply(tmp_path, ro, layer(("f", ".wh.locked", "")))
    assert tree(tmp_path) == {}


def test_caps_count_the_whole_stack(tmp_path: Path) -> None:
    extractor = LayerExtractor(tmp_path, Caps(max_bytes=10**9, max_entries=3))
    try:
        with pytest.raises(UnsafeArchiveError, match="more than 3 entries"):
            for raw in (
                layer(("f", "a", "1"), ("f", "b", "2")),
                layer(("f", "c", "3"), ("f", "d", "4")),
            ):
                extractor.next_layer()
                tar = TarStream(raw)
                for member in tar.members():
                    extractor.add(member, tar)
    finally:
        extractor.close()


def test_a_whiteout_of_nothing_makes_nothing(tmp_path: Path) -> None:
    upper = layer(("f", "nope/deeper/.wh.x", ""), ("f", ".wh.b", ""))
    apply(tmp_path, layer(("f", "a", "1")), upper)
    assert tree(tmp_path) == {"a": "1"}


def test_an_absolute_link_means_the_image_root_and_may_not_climb_above_it(
    tmp_path: Path,
) -> None:
    apply(tmp_path, layer(("f", "usr/bin/x", "x"), ("l", "etc/alternatives/x", "/usr/bin/x")))
    assert os.readlink(tmp_path / "etc/alternatives/x") == "/usr/bin/x"  # kept as written
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(UnsafeArchiveError, match="leaves the image directory"):
        apply(other, layer(("l", "etc/escape", "/../../etc/passwd")))
