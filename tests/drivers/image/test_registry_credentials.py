"""Registry credentials found as podman, skopeo and docker find them: real auth files in
temporary homes, and real `docker-credential-*` programs on PATH (shell scripts written by
the tests) answering, hanging, crashing and printing garbage."""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import shlex
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from cli.exit_codes import ExitCode, exit_code_for
from drivers.image.registry import credentials as creds
from drivers.image.registry.credentials import (
    Credential,
    describe_source,
    find_credential,
    run_credential_helper,
)
from providers.core.errors import ConfigError, CredentialsError, UsageError

SECRET = "s3cr3t-Pa55word"  # every password below contains it: it must never be shown
HELPER_SECRET = "helper-s3cr3t-Pa55word"
TOKEN_SECRET = "identity-s3cr3t-token"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def auth(user: str, password: str) -> dict[str, str]:
    return {"auth": b64(f"{user}:{password}")}


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))
    return path


class Helpers:
    """A directory on PATH of real `docker-credential-NAME` programs, each logging the server
    URL it read on stdin and the environment it ran with."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.log = root / "log"
        self.bin.mkdir(parents=True)
        self.log.mkdir()

    def _write(self, name: str, body: str) -> None:
        path = self.bin / f"docker-credential-{name}"
        log = shlex.quote(str(self.log / name))
        path.write_text(
            "#!/bin/sh\n"
            f'[ "$1" = get ] || {{ echo "unexpected action $1" >&2; exit 2; }}\n'
            "url=$(cat)\n"
            f'printf %s "$url" > {log}.stdin\n'
            f"env > {log}.env\n" + body
        )
        path.chmod(0o755)

    def answer(self, name: str, answers: Mapping[str, dict[str, str]]) -> None:
        """Answer each server URL in `answers` with its JSON; any other: not found."""
        cases = "".join(
            f"  {shlex.quote(url)}) printf '%s\\n' {shlex.quote(json.dumps(reply))} ;;\n"
            for url, reply in answers.items()
        )
        self._write(
            name,
            f"case \"$url\" in\n{cases}  *) echo '{creds.HELPER_NOT_FOUND}'; exit 1 ;;\nesac\n",
        )

    def hang(self, name: str) -> None:
        self._write(
            name, f"sleep 30 &\necho $! > {shlex.quote(str(self.log / name))}.sleep\nwait\n"
        )

    def garbage(self, name: str) -> None:
        self._write(name, f"echo 'user=helper-user password={HELPER_SECRET}'\n")

    def crash(self, name: str, status: int, message: str) -> None:
        self._write(
            name, f"echo {shlex.quote(message)}\necho 'more on stderr' >&2\nexit {status}\n"
        )

    def stdin(self, name: str) -> str | None:
        path = self.log / f"{name}.stdin"
        return path.read_text() if path.exists() else None

    def env(self, name: str) -> dict[str, str]:
        lines = (self.log / f"{name}.env").read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if "=" in line)


@pytest.fixture
def helpers(tmp_path: Path) -> Helpers:
    return Helpers(tmp_path / "helpers")


@pytest.fixture
def user_home(tmp_path: Path) -> Path:
    path = tmp_path / "userhome"
    path.mkdir()
    return path


@pytest.fixture
def env(tmp_path: Path, helpers: Helpers) -> dict[str, str]:
    """The environment of a lookup: helpers on PATH, and XDG_RUNTIME_DIR in the test's
    directory (without it the lookup would read this machine's /run/containers)."""
    run = tmp_path / "run"
    run.mkdir()
    return {"PATH": f"{helpers.bin}:/usr/bin:/bin", "XDG_RUNTIME_DIR": str(run)}


@pytest.fixture
def lookup(env: dict[str, str], user_home: Path) -> Callable[..., Credential | None]:
    def run(registry: str = "ghcr.io", repository: str = "acme/build-env", **kw: Any) -> Any:
        return find_credential(registry, repository, env=env, home=user_home, **kw)

    return run


def runtime_file(env: Mapping[str, str]) -> Path:
    return Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"


def config_file(home: Path) -> Path:
    return home / ".config" / "containers" / "auth.json"


def docker_file(home: Path) -> Path:
    return home / ".docker" / "config.json"


def assert_no_secret(text: str) -> None:
    for secret in (SECRET, HELPER_SECRET, TOKEN_SECRET, b64(SECRET)[:12]):
        assert secret not in text


# --- explicit credentials -------------------------------------------------------------


def test_flags_beat_every_file(lookup, env, user_home):
    write_json(runtime_file(env), {"auths": {"ghcr.io": auth("file-user", SECRET)}})
    found = lookup(user="cli-user", password="cli-" + SECRET)
    assert (found.username, found.password, found.identity_token) == (
        "cli-user",
        "cli-" + SECRET,
        None,
    )
    assert found.source == "--user and --password-stdin"


def test_environment_user_and_password_stand_in_for_the_flags(lookup, env):
    env.update(SHOAL_IMAGE_USER="env-user", SHOAL_IMAGE_PASSWORD="env-" + SECRET)
    found = lookup()
    assert (found.username, found.password) == ("env-user", "env-" + SECRET)
    assert found.source == "SHOAL_IMAGE_USER and SHOAL_IMAGE_PASSWORD"
    # the flag's value wins over the variable's
    assert lookup(password="flag-" + SECRET).source == "SHOAL_IMAGE_USER and --password-stdin"


def test_a_password_without_a_user_is_a_usage_error(lookup, env):
    env["SHOAL_IMAGE_PASSWORD"] = SECRET
    with pytest.raises(UsageError) as caught:
        lookup()
    assert "no user" in str(caught.value)
    assert exit_code_for(caught.value) == ExitCode.USAGE
    assert_no_secret(str(caught.value))


def test_a_user_alone_takes_its_password_from_the_files(lookup, env, user_home):
    write_json(runtime_file(env), {"auths": {"ghcr.io": auth("other", "other-" + SECRET)}})
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("bob", SECRET)}})
    found = lookup(user="bob")
    assert (found.username, found.password) == ("bob", SECRET)
    with pytest.raises(UsageError) as caught:
        lookup(user="carol")
    assert "--user carol has no password for ghcr.io" in str(caught.value)
    assert_no_secret(str(caught.value))


# --- the order of the files -------------------------------------------------------------


def test_no_file_means_anonymous(lookup):
    assert lookup() is None


def test_registry_auth_file_first_and_in_place_of_the_runtime_file(
    lookup, env, user_home, tmp_path
):
    named = write_json(tmp_path / "ci-auth.json", {"auths": {"ghcr.io": auth("named", SECRET)}})
    write_json(runtime_file(env), {"auths": {"ghcr.io": auth("runtime", SECRET)}})
    write_json(config_file(user_home), {"auths": {"ghcr.io": auth("config", SECRET)}})
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("docker", SECRET)}})
    env["REGISTRY_AUTH_FILE"] = str(named)
    found = lookup()
    assert found.username == "named"
    assert found.source == f"{named} auths['ghcr.io']"
    # As podman's --authfile: the named file replaces the runtime one, the rest follow.
    write_json(named, {"auths": {"quay.io": auth("named", SECRET)}})
    assert lookup().username == "config"


def test_registry_auth_file_that_does_not_exist_is_a_config_error(lookup, env, tmp_path):
    env["REGISTRY_AUTH_FILE"] = str(tmp_path / "missing.json")
    with pytest.raises(ConfigError) as caught:
        lookup()
    assert f"REGISTRY_AUTH_FILE names {tmp_path / 'missing.json'}, which does not exist" in str(
        caught.value
    )
    assert exit_code_for(caught.value) == ExitCode.CONFIG


def test_runtime_file_then_config_file_then_docker(lookup, env, user_home):
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("docker", SECRET)}})
    assert lookup().username == "docker"
    write_json(config_file(user_home), {"auths": {"ghcr.io": auth("config", SECRET)}})
    assert lookup().username == "config"
    write_json(runtime_file(env), {"auths": {"ghcr.io": auth("runtime", SECRET)}})
    assert lookup().username == "runtime"


def test_a_file_without_the_registry_passes_to_the_next(lookup, env, user_home):
    write_json(runtime_file(env), {"auths": {"quay.io": auth("quay", SECRET)}})
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("docker", SECRET)}})
    assert lookup().username == "docker"


def test_xdg_config_home_moves_the_config_file(lookup, env, user_home, tmp_path):
    write_json(config_file(user_home), {"auths": {"ghcr.io": auth("home-config", SECRET)}})
    elsewhere = tmp_path / "xdg-config"
    write_json(elsewhere / "containers" / "auth.json", {"auths": {"ghcr.io": auth("xdg", SECRET)}})
    env["XDG_CONFIG_HOME"] = str(elsewhere)
    assert lookup().username == "xdg"


def test_docker_config_replaces_the_home_docker_directory(lookup, env, user_home, tmp_path):
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("home-docker", SECRET)}})
    env["DOCKER_CONFIG"] = str(tmp_path / "dockercfg-dir")
    assert lookup() is None  # ~/.docker is not read when DOCKER_CONFIG names another
    write_json(
        tmp_path / "dockercfg-dir" / "config.json", {"auths": {"ghcr.io": auth("dc", SECRET)}}
    )
    assert lookup().username == "dc"


def test_without_xdg_runtime_dir_podmans_per_uid_file(lookup, env, tmp_path, monkeypatch):
    del env["XDG_RUNTIME_DIR"]
    per_uid = tmp_path / "run-containers" / "{uid}" / "auth.json"
    monkeypatch.setattr(creds, "PER_UID_AUTH_FILE", str(per_uid))
    write_json(
        Path(str(per_uid).format(uid=os.getuid())), {"auths": {"ghcr.io": auth("root", SECRET)}}
    )
    assert lookup().username == "root"


def test_legacy_dockercfg_last(lookup, user_home):
    write_json(user_home / ".dockercfg", {"https://ghcr.io/v1/": auth("legacy", SECRET)})
    assert lookup().username == "legacy"
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("docker", SECRET)}})
    assert lookup().username == "docker"


# --- keys -------------------------------------------------------------------------------


def test_the_most_specific_repository_key_wins(lookup, env):
    write_json(
        runtime_file(env),
        {
            "auths": {
                "ghcr.io": auth("registry", SECRET),
                "ghcr.io/acme": auth("namespace", SECRET),
                "ghcr.io/acme/build-env": auth("repository", SECRET),
                "ghcr.io/acme/other": auth("sibling", SECRET),
            }
        },
    )
    assert lookup(repository="acme/build-env").username == "repository"
    assert lookup(repository="acme/runner").username == "namespace"
    assert lookup(repository="acme/other").username == "sibling"
    assert lookup(repository="someone/else").username == "registry"
    assert lookup(repository="acme/build-env").source.endswith("auths['ghcr.io/acme/build-env']")


def test_a_repository_key_never_stands_for_its_registry(lookup, env):
    write_json(runtime_file(env), {"auths": {"ghcr.io/acme": auth("namespace", SECRET)}})
    assert lookup(repository="other/thing") is None


@pytest.mark.parametrize(
    "key", ["https://ghcr.io", "http://ghcr.io", "ghcr.io/v1/", "https://ghcr.io/v2/", "GHCR.io"]
)
def test_keys_older_tools_wrote_match_their_registry(lookup, env, key):
    write_json(runtime_file(env), {"auths": {key: auth("old", SECRET)}})
    assert lookup().username == "old"


def test_a_port_is_part_of_the_registry(lookup, env):
    write_json(
        runtime_file(env),
        {
            "auths": {
                "localhost:5000": auth("five", SECRET),
                "https://localhost:5001/v1/": auth("one", SECRET),
            }
        },
    )
    assert lookup("localhost:5000").username == "five"
    assert lookup("localhost:5001").username == "one"
    assert lookup("localhost") is None


@pytest.mark.parametrize(
    "key", ["https://index.docker.io/v1/", "index.docker.io", "registry-1.docker.io", "docker.io"]
)
@pytest.mark.parametrize("registry", ["docker.io", "index.docker.io", "registry-1.docker.io"])
def test_docker_hub_aliases(lookup, env, key, registry):
    write_json(runtime_file(env), {"auths": {key: auth("hub", SECRET)}})
    assert lookup(registry, "library/busybox").username == "hub"


def test_an_exact_key_beats_an_older_spelling(lookup, env):
    write_json(
        runtime_file(env),
        {
            "auths": {
                "https://index.docker.io/v1/": auth("old", SECRET),
                "docker.io": auth("exact", SECRET),
            }
        },
    )
    assert lookup("docker.io", "library/busybox").username == "exact"


def test_identity_token_and_plain_fields(lookup, env, user_home):
    write_json(
        docker_file(user_home),
        {
            "auths": {
                "ghcr.io": {"auth": b64("bob:"), "identitytoken": TOKEN_SECRET},
                "quay.io": {"username": "plain", "password": SECRET},
            }
        },
    )
    found = lookup()
    assert (found.username, found.password, found.identity_token) == ("bob", "", TOKEN_SECRET)
    assert found.describe() == f"an identity token from {docker_file(user_home)} auths['ghcr.io']"
    plain = lookup("quay.io")
    assert (plain.username, plain.password) == ("plain", SECRET)


def test_auth_without_padding_and_with_nul_padding(lookup, env):
    write_json(
        runtime_file(env),
        {"auths": {"ghcr.io": {"auth": b64(f"bob:{SECRET}\0\0").rstrip("=")}}},
    )
    assert lookup().password == SECRET


def test_an_entry_without_a_credential_passes_to_the_next_file(lookup, env, user_home):
    write_json(runtime_file(env), {"auths": {"ghcr.io": {}, "quay.io": {"auth": b64("bob:")}}})
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("docker", SECRET)}})
    assert lookup().username == "docker"
    assert lookup("quay.io") is None


def test_a_broken_entry_of_another_registry_is_left_alone(lookup, env):
    write_json(
        runtime_file(env),
        {"auths": {"quay.io": {"auth": "%%%"}, "ghcr.io": auth("bob", SECRET)}},
    )
    assert lookup().username == "bob"


# --- helpers ----------------------------------------------------------------------------


def test_cred_helpers_answer_for_their_registry(lookup, env, user_home, helpers):
    helpers.answer(
        "test", {"ghcr.io": {"ServerURL": "ghcr.io", "Username": "hu", "Secret": HELPER_SECRET}}
    )
    write_json(
        docker_file(user_home),
        {"auths": {"ghcr.io": auth("inline", SECRET)}, "credHelpers": {"ghcr.io": "test"}},
    )
    found = lookup()
    assert (found.username, found.password) == ("hu", HELPER_SECRET)
    assert helpers.stdin("test") == "ghcr.io"  # the server URL, alone, on stdin
    assert (
        found.source
        == f"docker-credential-test (credHelpers['ghcr.io'] in {docker_file(user_home)})"
    )
    assert HELPER_SECRET not in repr(found) and HELPER_SECRET not in str(found)


def test_a_cred_helper_that_has_nothing_passes_to_the_next_file(lookup, env, user_home, helpers):
    helpers.answer("test", {})
    write_json(
        runtime_file(env),
        {"auths": {"ghcr.io": auth("same-file", SECRET)}, "credHelpers": {"ghcr.io": "test"}},
    )
    write_json(docker_file(user_home), {"auths": {"ghcr.io": auth("next-file", SECRET)}})
    # as podman and docker: the helper decides for its registry in its file
    assert lookup().username == "next-file"
    assert helpers.stdin("test") == "ghcr.io"


def test_cred_helpers_for_docker_hub_are_asked_with_their_own_key(lookup, user_home, helpers):
    helpers.answer(
        "test",
        {"https://index.docker.io/v1/": {"Username": "<token>", "Secret": TOKEN_SECRET}},
    )
    write_json(docker_file(user_home), {"credHelpers": {"https://index.docker.io/v1/": "test"}})
    found = lookup("docker.io", "library/busybox")
    assert (found.username, found.password, found.identity_token) == ("", "", TOKEN_SECRET)
    assert TOKEN_SECRET not in repr(found)


def test_creds_store_after_auths(lookup, user_home, helpers):
    helpers.answer(
        "store",
        {
            "ghcr.io": {"Username": "stored", "Secret": HELPER_SECRET},
            "https://index.docker.io/v1/": {"Username": "hub", "Secret": HELPER_SECRET},
        },
    )
    write_json(
        docker_file(user_home),
        {"auths": {"quay.io": auth("inline", SECRET)}, "credsStore": "store"},
    )
    assert lookup("quay.io").username == "inline"
    assert helpers.stdin("store") is None  # an inline credential needs no helper
    assert lookup().username == "stored"
    assert helpers.stdin("store") == "ghcr.io"
    # Docker Hub is asked for by the key docker login stores it under
    assert lookup("docker.io", "library/busybox").username == "hub"
    assert helpers.stdin("store") == "https://index.docker.io/v1/"


def test_creds_store_is_asked_with_the_key_of_dockers_marker(lookup, user_home, helpers):
    helpers.answer("store", {"https://ghcr.io": {"Username": "marked", "Secret": HELPER_SECRET}})
    write_json(docker_file(user_home), {"auths": {"https://ghcr.io": {}}, "credsStore": "store"})
    assert lookup().username == "marked"
    assert helpers.stdin("store") == "https://ghcr.io"


def test_a_helper_runs_without_shoals_variables(lookup, env, user_home, helpers):
    helpers.answer("test", {"ghcr.io": {"Username": "hu", "Secret": HELPER_SECRET}})
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "test"}})
    env.update(SHOAL_IMAGE_USER="hu", SHOAL_HOME="/x", AWS_PROFILE="ci", HOME=str(user_home))
    assert lookup().username == "hu"
    seen = helpers.env("test")
    assert not [name for name in seen if name.startswith("SHOAL_")]
    # what cloud helpers (ecr-login, gcr) need stays
    assert seen["AWS_PROFILE"] == "ci" and seen["HOME"] == str(user_home)


def test_a_missing_helper_is_a_credentials_error_naming_it(lookup, user_home):
    write_json(docker_file(user_home), {"credsStore": "desktop"})
    with pytest.raises(CredentialsError) as caught:
        lookup()
    message = str(caught.value)
    assert message == (
        f"registry ghcr.io: docker-credential-desktop is not on PATH (credsStore in "
        f"{docker_file(user_home)} names it); install it, or put its directory on PATH, "
        "or remove that entry"
    )
    assert exit_code_for(caught.value) == ExitCode.CREDENTIALS


def test_a_hanging_helper_is_stopped_with_what_it_started(user_home, env, helpers, capfd):
    helpers.hang("slow")
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "slow"}})
    started = time.monotonic()
    with pytest.raises(CredentialsError) as caught:
        find_credential(
            "ghcr.io",
            "acme/build-env",
            env=env,
            home=user_home,
            run_helper=functools.partial(run_credential_helper, timeout=0.5),
        )
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert "docker-credential-slow get did not answer within 0.5 s" in message
    assert f"(credHelpers['ghcr.io'] in {docker_file(user_home)} names it)" in message
    assert exit_code_for(caught.value) == ExitCode.CREDENTIALS
    sleeper = int((helpers.log / "slow.sleep").read_text())
    assert gone(sleeper), "the helper's child outlived the timeout"
    assert capfd.readouterr() == ("", "")


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts: it runs no more)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_the_default_timeout_is_ten_seconds():
    assert creds.HELPER_TIMEOUT == 10
    assert run_credential_helper.__kwdefaults__ == {"timeout": 10}


def test_a_helper_printing_garbage_is_a_credentials_error_that_quotes_none_of_it(
    lookup, user_home, helpers
):
    helpers.garbage("junk")
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "junk"}})
    with pytest.raises(CredentialsError) as caught:
        lookup()
    message = str(caught.value)
    assert "docker-credential-junk get answered something other than the JSON" in message
    assert "helper-user" not in message
    assert_no_secret(message)


@pytest.mark.parametrize(
    "reply", ['"just a string"', '{"Username": 7, "Secret": "x"}', "[1, 2]", ""]
)
def test_answers_that_are_not_credentials(user_home, env, helpers, reply):
    helpers._write("odd", f"printf '%s' {shlex.quote(reply)}\n")
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "odd"}})
    with pytest.raises(CredentialsError, match="answered something other than the JSON"):
        find_credential("ghcr.io", "acme/x", env=env, home=user_home)


def test_a_crashing_helper_is_named_with_its_message_scrubbed(lookup, env, user_home, helpers):
    env["GITHUB_TOKEN"] = "ghp_" + SECRET
    helpers.crash("broken", 3, f"pass: store not initialised (token ghp_{SECRET})")
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "broken"}})
    with pytest.raises(CredentialsError) as caught:
        lookup()
    message = str(caught.value)
    assert (
        "docker-credential-broken get failed with exit status 3: pass: store not initialised"
        in message
    )
    assert "run `printf %s ghcr.io | docker-credential-broken get` to see why" in message
    assert_no_secret(message)


def test_a_failing_helper_whose_output_may_be_an_answer_is_not_quoted(lookup, user_home, helpers):
    helpers.crash("leaky", 1, json.dumps({"Username": "u", "Secret": HELPER_SECRET}))
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": "leaky"}})
    with pytest.raises(CredentialsError) as caught:
        lookup()
    assert "failed with exit status 1 (credHelpers" in str(caught.value)
    assert_no_secret(str(caught.value))


@pytest.mark.parametrize("name", ["../../bin/sh", "", "a b", 7])
def test_a_helper_name_that_is_a_path_is_refused(lookup, user_home, name):
    write_json(docker_file(user_home), {"credHelpers": {"ghcr.io": name}})
    with pytest.raises(ConfigError) as caught:
        lookup()
    assert f"credHelpers['ghcr.io'] in {docker_file(user_home)}" in str(caught.value)


def test_an_injected_runner_is_used(lookup, user_home):
    calls: list[tuple[str, str]] = []

    def fake(name: str, server: str, env: Mapping[str, str]) -> tuple[str, str] | None:
        calls.append((name, server))
        return ("fake", HELPER_SECRET)

    write_json(docker_file(user_home), {"credsStore": "anything"})
    assert lookup(run_helper=fake).username == "fake"
    assert calls == [("anything", "ghcr.io")]


# --- malformed files ----------------------------------------------------------------------


def test_json_syntax_error_gives_line_and_column_not_content(lookup, env):
    path = runtime_file(env)
    path.parent.mkdir(parents=True)
    path.write_text(
        "{\n"
        '  "auths": {\n'
        f'    "ghcr.io": {{"auth": "{b64(f"u:{SECRET}")}"}}\n'
        '    "quay.io": {}\n'
        "}\n"
    )
    with pytest.raises(ConfigError) as caught:
        lookup()
    message = str(caught.value)
    assert message.startswith(f"{path} line 4 column 5: not valid JSON (Expecting ',' delimiter)")
    assert exit_code_for(caught.value) == ExitCode.CONFIG
    assert_no_secret(message)


@pytest.mark.parametrize(
    ("entry", "fault"),
    [
        ({"auth": "not base64!" + SECRET}, "auths['ghcr.io'].auth is not base64"),
        ({"auth": b64("no-colon-" + SECRET)}, "auths['ghcr.io'].auth decodes to no user:password"),
        ({"auth": b64(":" + SECRET)}, "auths['ghcr.io'].auth has an empty user name"),
        (
            {"auth": base64.b64encode(b"\xff\xfe:" + SECRET.encode()).decode()},
            "auths['ghcr.io'].auth does not decode to text",
        ),
        ({"auth": 12345}, "auths['ghcr.io'].auth is a JSON number, not a string"),
        ("u:" + SECRET, "auths['ghcr.io'] is a JSON string, not an object"),
    ],
)
def test_a_malformed_entry_names_file_and_key_never_the_value(lookup, env, entry, fault):
    path = write_json(runtime_file(env), {"auths": {"ghcr.io": entry}})
    with pytest.raises(ConfigError) as caught:
        lookup()
    message = str(caught.value)
    assert message.startswith(f"{path}: {fault}")
    assert exit_code_for(caught.value) == ExitCode.CONFIG
    assert_no_secret(message)
    assert "no-colon" not in message


@pytest.mark.parametrize(
    ("data", "fault"),
    [
        ([{"auths": {}}], "holds a JSON array, not an object"),
        ({"auths": ["ghcr.io"]}, "'auths' is a JSON array, not an object"),
        ({"credHelpers": "test"}, "'credHelpers' is a JSON string, not an object"),
    ],
)
def test_a_malformed_file_shape(lookup, env, data, fault):
    path = write_json(runtime_file(env), data)
    with pytest.raises(ConfigError, match="^" + re.escape(f"{path}: {fault}")):
        lookup()


def test_not_utf8_and_a_directory(lookup, env, user_home):
    path = runtime_file(env)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"auths": {\n"ghcr.io": {"auth": "\xff\xfe"}}}')
    with pytest.raises(ConfigError, match="line 2: not UTF-8 text"):
        lookup()
    path.unlink()
    docker_file(user_home).mkdir(parents=True)
    with pytest.raises(ConfigError, match="is a directory, not a registry auth file"):
        lookup()


def test_an_empty_file_holds_nothing(lookup, env):
    runtime_file(env).parent.mkdir(parents=True)
    runtime_file(env).write_text("\n")
    assert lookup() is None


# --- nothing shown --------------------------------------------------------------------------


def test_repr_str_and_debug_line_hide_secrets(lookup, env, capfd, caplog):
    write_json(runtime_file(env), {"auths": {"ghcr.io": auth("bob", SECRET)}})
    found = lookup()
    for text in (repr(found), str(found), found.describe(), describe_source("ghcr.io", found)):
        assert_no_secret(text)
    source = f"{runtime_file(env)} auths['ghcr.io']"
    assert repr(found) == (
        f"Credential(username='bob', password='***', identity_token=None, source={source!r})"
    )
    assert describe_source("ghcr.io", found) == (
        f"registry ghcr.io: user 'bob' from {runtime_file(env)} auths['ghcr.io']"
    )
    assert (
        describe_source("ghcr.io", None)
        == "registry ghcr.io: no credential found; pulling anonymously"
    )
    assert capfd.readouterr() == ("", "")
    assert caplog.records == []
