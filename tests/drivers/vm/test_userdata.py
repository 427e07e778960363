"""The boot script's `end`: for a cloud where a shutdown from inside does not end the bill
(Azure), the expiry runs a script that ends the instance itself, and no shutdown timer is
armed. Run for real with `sh`, the commands it calls stubbed on PATH; and the azure
driver's end script (its own VM deleted through the identity's token) run the same way."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from drivers.azure.driver import self_delete_script
from drivers.vm.userdata import END_SCRIPT, user_data


def part(script: bytes, marker: str) -> str:
    text = script.decode()
    return text.split(f"<<'{marker}'\n", 1)[1].split(f"\n{marker}\n", 1)[0] + "\n"


def stubs(tmp_path: Path, **bodies: str) -> dict[str, str]:
    """An environment whose PATH starts with stub commands (NAME -> shell body)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in bodies.items():
        stub = bin_dir / name
        stub.write_text("#!/bin/sh\n" + body + "\n")
        stub.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def wait_lines(path: Path, count: int) -> list[str]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            break
        time.sleep(0.05)
    return path.read_text().splitlines() if path.exists() else []


def test_an_end_script_replaces_the_shutdown_at_the_expiry(tmp_path: Path) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=90)
    script = user_data("azure-1", expires=soon, environment={}, entry=[], end="echo ended\n")
    assert subprocess.run(["sh", "-n"], input=script, check=False).returncode == 0
    assert part(script, "SHOAL_END") == "echo ended\n"
    expiry = part(script, "SHOAL_EXPIRY")
    assert "shutdown" not in expiry  # a halted OS could not end the VM: no timer armed
    log = tmp_path / "end.log"
    end = tmp_path / "end.sh"
    end.write_text(f"#!/bin/sh\necho ran >> {log}\n")
    end.chmod(0o755)
    body = expiry.replace(END_SCRIPT, str(end)).replace("sleep $left", "sleep 0")
    (tmp_path / "expiry.sh").write_text(body)
    env = stubs(tmp_path, shutdown=f"echo shutdown >> {tmp_path / 'shutdown.log'}")
    subprocess.run(["sh", str(tmp_path / "expiry.sh")], env=env, check=True, timeout=10)
    assert wait_lines(log, 1) == ["ran"]
    assert not (tmp_path / "shutdown.log").exists()
    # Past already: the end runs at once.
    past = datetime.now(UTC) - timedelta(minutes=1)
    body = part(
        user_data("azure-2", expires=past, environment={}, entry=[], end="x"), "SHOAL_EXPIRY"
    )
    (tmp_path / "past.sh").write_text(body.replace(END_SCRIPT, str(end)))
    subprocess.run(["sh", str(tmp_path / "past.sh")], env=env, check=True, timeout=10)
    assert wait_lines(log, 2) == ["ran", "ran"]


def run_self_delete(tmp_path: Path, answer: str) -> tuple[list[str], list[str]]:
    """The azure end script with `curl` answering as IMDS and ARM would (`answer`: the
    DELETE's HTTP code), `sleep` and `shutdown` recorded: (curl calls, shutdowns)."""
    calls, downs = tmp_path / "curl.log", tmp_path / "shutdown.log"
    curl = f"""echo "$*" >> {calls}
case "$*" in
  *compute/resourceId*) printf %s /subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/shoal-azure-1 ;;
  *oauth2/token*) printf %s '{{"access_token":"eyJ.token.sig","expires_in":"3599"}}' ;;
  *-X\\ DELETE*) printf %s {answer} ;;
esac"""  # noqa: E501
    env = stubs(tmp_path, curl=curl, sleep="true", shutdown=f'echo "$*" >> {downs}')
    script = self_delete_script("https://management.azure.com").replace("seq 30", "seq 3")
    (tmp_path / "end.sh").write_text(script)
    subprocess.run(["sh", str(tmp_path / "end.sh")], env=env, check=True, timeout=10)
    said = calls.read_text().splitlines()
    return said, downs.read_text().splitlines() if downs.exists() else []


def test_the_azure_end_script_deletes_its_own_vm_with_the_identitys_token(
    tmp_path: Path,
) -> None:
    calls, downs = run_self_delete(tmp_path, "202")
    (delete,) = [c for c in calls if "DELETE" in c]
    assert "Authorization: Bearer eyJ.token.sig" in delete
    assert (
        "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/"
        "Microsoft.Compute/virtualMachines/shoal-azure-1?api-version=" in delete
    )
    assert any("resource=https://management.azure.com/" in c for c in calls)
    assert downs == []  # deleted: nothing to power off


def test_the_azure_end_script_retries_then_powers_off(tmp_path: Path) -> None:
    calls, downs = run_self_delete(tmp_path, "403")
    assert len([c for c in calls if "DELETE" in c]) == 3
    assert downs and downs[0].startswith("-h now")
