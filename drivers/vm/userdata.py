"""The user-data script an instance runs at its first boot (cloud-init runs it as root):
the lifetime armed, then the definition's `entry` with its environment.

The lifetime. The instance is launched with InstanceInitiatedShutdownBehavior=terminate,
so a shutdown from inside terminates it. The script writes a small script that arms one
for the expiry, runs it now, and leaves it in cloud-init's per-boot directory so a reboot
arms it again: `shutdown -h +M` (M minutes, rounded up) as the system's own timer, and a
detached `sleep` to the second that then shuts down at once; an expiry already past shuts
down at once. The expiry is an absolute time (epoch seconds), so a slow boot does not
lengthen the lifetime. An image without cloud-init runs no user-data: the next shoal
command that finds the instance past its `shoal:expires` tag terminates it.

The environment. `--meta` and `-o env` become `export NAME='value'` lines (single-quoted,
so nothing in a value is expanded), then `entry` runs with `exec`, its output in
cloud-init's log (/var/log/cloud-init-output.log) and on the console (`shoal logs ID`, the
`console` task). User-data is readable by anyone who may call DescribeInstanceAttribute
and by every process on the instance: credentials never go here (the driver refuses
them; give the instance a role with `instance_profile` and read secrets at boot).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import datetime

from providers.core.errors import UsageError

MAX_BYTES = 16 * 1024  # EC2's limit on user-data before base64
PER_BOOT = "/var/lib/cloud/scripts/per-boot/shoal-expiry.sh"
END_SCRIPT = "/usr/local/sbin/shoal-end"


def _quote(value: str) -> str:
    return shlex.quote(value)


def user_data(
    allocation_id: str,
    *,
    expires: datetime | None,
    environment: Mapping[str, str],
    entry: Sequence[str],
    end: str = "",
) -> bytes:
    """The script, at most MAX_BYTES (a larger one is a UsageError naming what to shrink).

    `end`: a shell script that ends the instance itself at its expiry, for a cloud where a
    shutdown from inside does not (Azure: a VM shut down stays allocated and billed). It is
    written to END_SCRIPT and run at the expiry instead of the shutdown, and no system
    shutdown timer is armed (a halted OS could not run it); it shuts down itself if it
    cannot end the instance."""
    lines = [
        "#!/bin/sh",
        f"# Written by shoal for allocation {allocation_id}; runs once, as root, at first boot.",
    ]
    if expires is not None:
        from providers.core.wire import format_time

        epoch = int(expires.timestamp())
        when = format_time(expires)
        message = _quote(f"shoal: the lifetime of {allocation_id} ends at {when}")
        lines += [
            f"# The lifetime ends at {when}: shut down then (the instance then terminates).",
            f"mkdir -p {PER_BOOT.rsplit('/', 1)[0]}",
            f"cat > {PER_BOOT} <<'SHOAL_EXPIRY'",
            "#!/bin/sh",
            f"left=$(( {epoch} - $(date +%s) ))",
        ]
        if end:
            lines += [
                f'if [ "$left" -le 0 ]; then exec {END_SCRIPT}; fi',
                f'nohup setsid sh -c "sleep $left; exec {END_SCRIPT}" >/dev/null 2>&1 </dev/null &',
                "SHOAL_EXPIRY",
                f"mkdir -p {END_SCRIPT.rsplit('/', 1)[0]}",
                f"cat > {END_SCRIPT} <<'SHOAL_END'",
                end.rstrip("\n"),
                "SHOAL_END",
                f"chmod 700 {END_SCRIPT}",
            ]
        else:
            lines += [
                f'if [ "$left" -le 0 ]; then exec shutdown -h now {message}; fi',
                f"shutdown -h +$(( (left + 59) / 60 )) {message} >/dev/null 2>&1",
                'nohup setsid sh -c "sleep $left; shutdown -h now" >/dev/null 2>&1 </dev/null &',
                "SHOAL_EXPIRY",
            ]
        lines += [f"chmod 755 {PER_BOOT}", PER_BOOT]
    if environment:
        lines.append("# The allocation's metadata and env:")
        lines += [f"export {name}={_quote(value)}" for name, value in environment.items()]
    if entry:
        lines += ["# The entry:", "exec " + " ".join(_quote(arg) for arg in entry)]
    script = ("\n".join(lines) + "\n").encode()
    if len(script) > MAX_BYTES:
        raise UsageError(
            f"user-data: the boot script would be {len(script)} bytes, more than EC2's "
            f"{MAX_BYTES}; shorten entry, env and --meta (or fetch a script at boot)"
        )
    return script
