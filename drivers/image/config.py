"""The config file's [image] table as a model (a model module: imported only to check it)."""

from __future__ import annotations

from pydantic import Field

from providers.core.strict import Positive, PositiveInt, Strict


class ImageSection(Strict):
    """Left out: PullOptions' defaults (drivers/image/pull.py), DATA/images for `dir`."""

    dir: str | None = Field(None, description="the images dir, a path")
    max_unpacked_gib: Positive | None = Field(None, description="refuse archives past this")
    max_entries: PositiveInt | None = Field(None, description="refuse archives past this")
    attempts: PositiveInt | None = Field(None, description="per request, and restarts per pull")
    backoff_seconds: Positive | None = Field(None, description="doubles per retry")
    read_timeout_seconds: Positive | None = Field(None, description="a longer stall is a drop")
    lock_timeout_seconds: Positive | None = Field(None, description="wait for another pull")
    insecure_registries: list[str] | None = Field(
        None,
        description="registries (host or host:port) that may be spoken to over plain HTTP; "
        "loopback ones always may",
    )
