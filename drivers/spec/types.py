"""The spec's driver-side types, with its JSON names.

`ram` and disk sizes are in GiB (the spec says GB; shoal counts binary units throughout).
`lifetime` is a duration such as `30m` or `1h30m`; the ledger turns it into an expiry time.
The service decides that time once (one reading of the ledger's clock: the row's `expires`)
and hands it to `ResourceDriver.allocate` as `resources.expires`, never on the wire: a
driver's deadline is that instant, not the lifetime parsed again from its own "now".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from providers.core.wire import field

# The metadata key (and, for local workloads, the environment variable) that carries the
# allocation id: how every driver marks what belongs to an allocation. Declared once.
ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"

STATUS_NONE = "NONE"
STATUS_ALLOCATED = "ALLOCATED"


@dataclass
class Disk:
    type: str = field(default="")
    label: str = field(default="")
    size: int = field(omitempty=True, default=0)  # GiB
    reuse: bool = field(default=False)
    clone: str = field(omitempty=True, default="")


@dataclass
class Resources:
    """What a definition asks for, and (as node usage) what all local drivers hold."""

    slots: int = field(omitempty=True, default=0)
    cpu: int = field(default=0)  # vCPUs
    ram: int = field(default=0)  # GiB
    disks: dict[str, Disk] = field(omitempty=True, default_factory=dict)
    network: str = field(omitempty=True, default="")
    node_filter: list[str] = field(omitempty=True, default_factory=list)
    multitenancy: bool = field(default=False)
    cpu_overbook: bool = field(default=False)
    ram_overbook: bool = field(default=False)
    lifetime: str = field(omitempty=True, default="")
    # Set by the service on the definition `allocate` gets: when `lifetime` ends (the ledger
    # row's `expires`, None without a lifetime). Not the spec's: never read from or written
    # to JSON.
    expires: datetime | None = field(internal=True, default=None)

    def is_empty(self) -> bool:
        return self.cpu == 0 and self.ram == 0 and not self.disks


@dataclass
class Authentication:
    username: str = field(default="")
    password: str = field(default="")
    key: str = field(default="")
    port: int = field(default=0)

    def __repr__(self) -> str:  # credentials never reach logs or tracebacks
        return (
            f"Authentication(username={self.username!r}, password=***, key=***, port={self.port})"
        )


@dataclass
class LabelDefinition:
    driver: str = field(default="")
    resources: Resources = field(default_factory=Resources)
    options: dict[str, Any] = field(default_factory=dict)
    authentication: Authentication | None = field(omitempty=True, default=None)


@dataclass
class Resource:
    """An allocated resource: the driver's handle on it, stored in the ledger between calls."""

    identifier: str = field(default="")
    hw_addr: str = field(omitempty=True, default="")
    ip_addr: str = field(omitempty=True, default="")
    metadata: dict[str, Any] = field(omitempty=True, default_factory=dict)
    authentication: Authentication | None = field(omitempty=True, default=None)
    timeout: datetime | None = field(omitempty=True, default=None)


@dataclass
class ApplicationTask:
    uid: str = field("UID", omitempty=True, default="")
    created_at: datetime | None = field(omitempty=True, default=None)
    updated_at: datetime | None = field(omitempty=True, default=None)
    application_uid: str = field("application_UID", default="")
    task: str = field(default="")
    when: str = field(default="")
    options: dict[str, Any] = field(omitempty=True, default_factory=dict)
    result: dict[str, Any] = field(omitempty=True, default_factory=dict)


@dataclass
class Image:
    """An image archive to download and unpack into OUT/NAME-VERSION/.

    Name and version default to the URL's file name split at its last `-`, without the
    archive extension (`ubuntu-base-22.04.tar.xz` -> `ubuntu-base`, `22.04`).
    """

    url: str = field(default="")
    sum: str = field(default="")  # "<algo>:<hex>"
    name: str = field(default="")
    version: str = field(default="")
    tag: str = field(default="")

    def validate(self) -> None:
        """Check url, sum, name and version; fill name/version from the URL when empty."""
        from drivers.image import checksum, naming

        naming.check_url(self.url)
        if self.sum:
            checksum.parse(self.sum)
        if not self.name or not self.version:
            name, version = naming.split_name_version(self.url)
            self.name = self.name or name
            self.version = self.version or version
        naming.check_component(self.name, "name")
        naming.check_component(self.version, "version")

    def download_unpack(self, out_dir: str, user: str, password: str) -> str:
        """Stream, verify and unpack into OUT_DIR/NAME-VERSION/; returns that path."""
        from pathlib import Path

        from drivers.image.pull import PullOptions, pull

        self.validate()
        opts = PullOptions(out_dir=Path(out_dir), user=user, password=password)
        return pull(self.url, self.sum, self.name, self.version, self.tag, opts).path
