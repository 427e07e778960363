"""Unpack a tar stream into the image directory: each member read in order and written,
then the directories' modes and times; the descriptors are closed whatever happens.

Reading is `drivers.image.tarstream`; what may be written, and how, `drivers.image.extractor`.
"""

from __future__ import annotations

from pathlib import Path

from drivers.image.decompress import Reader
from drivers.image.extractor import Caps, Extractor
from drivers.image.tarstream import TarStream


def extract(src: Reader, root: Path, caps: Caps) -> Extractor:
    """Unpack the tar stream `src` into the existing empty directory `root`."""
    tar = TarStream(src)
    extractor = Extractor(root, caps)
    try:
        for member in tar.members():
            extractor.add(member, tar)
        extractor.finish()
    finally:
        extractor.close()
    return extractor
