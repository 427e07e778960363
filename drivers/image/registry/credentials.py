"""Registry credentials, found where docker, podman and skopeo find them.

Sources, in order; the first that holds a credential for the registry wins:

1. a user and password given to shoal: --user with --password-stdin, or SHOAL_IMAGE_USER and
   SHOAL_IMAGE_PASSWORD (a user alone is looked up in the files below);
2. REGISTRY_AUTH_FILE, which takes the place of 3 as podman's --authfile does (skopeo and
   podman then skip the XDG_RUNTIME_DIR file, and so does shoal);
3. $XDG_RUNTIME_DIR/containers/auth.json (/run/containers/UID/auth.json without the variable):
   where `podman login` writes;
4. $XDG_CONFIG_HOME/containers/auth.json (default ~/.config/containers/auth.json);
5. $DOCKER_CONFIG/config.json, else ~/.docker/config.json: where `docker login` writes;
6. ~/.dockercfg, docker's legacy file (a bare map of `auths`).

In each file (containers-auth.json(5), docker's config.json) `credHelpers[registry]` decides
alone when present (as both tools do: the helper's "not found" moves on to the next file, not
to the same file's `auths`); then `auths`, most specific key first (podman's repository keys
`registry/namespace/repo`, then the registry, then keys older tools wrote: `https://registry`,
`registry/v1/`, docker.io's aliases); then `credsStore`. A helper is
`docker-credential-NAME get`, the server URL on stdin, a JSON answer on stdout
(docker-credential-helpers' protocol).

A secret is never in a message or a repr: a malformed file is named with its key, never its
value, and a helper's error output is quoted only when it cannot be its answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from providers.core.env import ENV_IMAGE_PASSWORD, ENV_IMAGE_USER
from providers.core.errors import ConfigError, CredentialsError, UsageError, shown

# The container tools' variables (not shoal's own: read as those tools read them).
ENV_REGISTRY_AUTH_FILE = "REGISTRY_AUTH_FILE"
ENV_XDG_RUNTIME_DIR = "XDG_RUNTIME_DIR"
ENV_XDG_CONFIG_HOME = "XDG_CONFIG_HOME"
ENV_DOCKER_CONFIG = "DOCKER_CONFIG"

# podman's primary file when XDG_RUNTIME_DIR is unset (root in a CI container, an ssh
# session without a login manager); a constant so tests can point it elsewhere.
PER_UID_AUTH_FILE = "/run/containers/{uid}/auth.json"

HELPER_PREFIX = "docker-credential-"
HELPER_TIMEOUT = 10.0  # seconds; a keychain waiting for a password would wait forever
# What every helper prints (stdout, exit 1) when it holds nothing for the server.
HELPER_NOT_FOUND = "credentials not found in native keychain"
# A helper's Username for an identity token (an OAuth refresh token), not a user name.
TOKEN_USERNAME = "<token>"

DOCKER_HUB = "docker.io"
# The key and server URL docker itself uses for Docker Hub, in `auths` and with helpers.
DOCKER_HUB_KEY = "https://index.docker.io/v1/"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

# A helper name is the tail of a program name looked up on PATH: nothing that makes it a path.
_HELPER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,99}")


@dataclass(frozen=True)
class Credential:
    """A registry credential: a user and password, or an identity token (an OAuth refresh
    token, sent as refresh_token to the token service). `source` says where it was found
    (a file and key, a helper, the flags), for a debug line; it never holds a secret."""

    username: str
    password: str
    identity_token: str | None = None
    source: str = field(default="", compare=False)

    def __repr__(self) -> str:
        password = "'***'" if self.password else "''"
        token = "None" if self.identity_token is None else "'***'"
        return (
            f"Credential(username={self.username!r}, password={password}, "
            f"identity_token={token}, source={self.source!r})"
        )

    __str__ = __repr__

    def describe(self) -> str:
        """One line for a debug log: who, and where from; no secret."""
        if self.identity_token is not None:
            return f"an identity token from {self.source}"
        return f"user {self.username!r} from {self.source}"


def describe_source(registry: str, credential: Credential | None) -> str:
    """The debug line for a lookup's result: which credential for `registry`, or none."""
    if credential is None:
        return f"registry {registry}: no credential found; pulling anonymously"
    return f"registry {registry}: {credential.describe()}"


class HelperError(CredentialsError):
    """A credential helper that is missing, hangs, crashes or answers garbage. `problem` says
    what happened, `hint` how to check it; find_credential adds which file named the helper."""

    def __init__(self, problem: str, hint: str) -> None:
        self.problem = problem
        self.hint = hint
        super().__init__(f"{problem}; {hint}")


# (helper name, server URL, environment) -> (Username, Secret), or None when the helper
# holds nothing for the server; raises HelperError.
RunHelper = Callable[[str, str, Mapping[str, str]], tuple[str, str] | None]


@dataclass(frozen=True)
class AuthFile:
    path: Path
    legacy: bool = False  # ~/.dockercfg: the whole file is the `auths` map
    named_by: str | None = None  # the variable that named it, which must then exist


def find_credential(
    registry: str,
    repository: str,
    *,
    env: Mapping[str, str],
    home: Path,
    user: str | None = None,
    password: str | None = None,
    run_helper: RunHelper | None = None,
) -> Credential | None:
    """The credential for `repository` ("library/busybox") on `registry` ("docker.io",
    "host:port"), or None to pull anonymously. `user` and `password` are what the command
    line gave (--user, --password-stdin); unset, SHOAL_IMAGE_USER and SHOAL_IMAGE_PASSWORD
    from `env` stand in. `home` is the user's home (~/.docker, ~/.config)."""
    registry = _registry_name(registry)
    given_user = user if user is not None else env.get(ENV_IMAGE_USER, "")
    given_password = password if password is not None else env.get(ENV_IMAGE_PASSWORD, "")
    user_from = "--user" if user is not None else ENV_IMAGE_USER
    password_from = "--password-stdin" if password is not None else ENV_IMAGE_PASSWORD
    if given_user and given_password:
        return Credential(given_user, given_password, source=f"{user_from} and {password_from}")
    if given_password:
        raise UsageError(
            f"{password_from} gives a password but no user; add --user or set {ENV_IMAGE_USER}"
        )
    runner = run_helper if run_helper is not None else run_credential_helper
    for auth_file in auth_files(env, home):
        found = _from_file(auth_file, registry, repository, env, runner)
        if found is not None and (not given_user or found.username == given_user):
            return found
    if given_user:
        raise UsageError(
            f"{user_from} {given_user} has no password for {registry}: pipe it to "
            f"--password-stdin, set {ENV_IMAGE_PASSWORD}, or log in with podman or docker"
        )
    return None


def auth_files(env: Mapping[str, str], home: Path) -> list[AuthFile]:
    """The files looked in, in order (some may not exist)."""
    files: list[AuthFile] = []
    if env.get(ENV_REGISTRY_AUTH_FILE):
        named = Path(env[ENV_REGISTRY_AUTH_FILE])
        files.append(AuthFile(named, named_by=ENV_REGISTRY_AUTH_FILE))
    elif env.get(ENV_XDG_RUNTIME_DIR):
        files.append(AuthFile(Path(env[ENV_XDG_RUNTIME_DIR]) / "containers" / "auth.json"))
    else:
        files.append(AuthFile(Path(PER_UID_AUTH_FILE.format(uid=os.getuid()))))
    config_home = Path(env[ENV_XDG_CONFIG_HOME]) if env.get(ENV_XDG_CONFIG_HOME) else None
    files.append(AuthFile((config_home or home / ".config") / "containers" / "auth.json"))
    docker_dir = Path(env[ENV_DOCKER_CONFIG]) if env.get(ENV_DOCKER_CONFIG) else home / ".docker"
    files.append(AuthFile(docker_dir / "config.json"))
    files.append(AuthFile(home / ".dockercfg", legacy=True))
    return files


def _registry_name(registry: str) -> str:
    return DOCKER_HUB if registry.lower() in _DOCKER_HUB_ALIASES else registry


def _from_file(
    auth_file: AuthFile,
    registry: str,
    repository: str,
    env: Mapping[str, str],
    runner: RunHelper,
) -> Credential | None:
    data = _read(auth_file)
    if data is None:
        return None
    path = auth_file.path
    if auth_file.legacy:
        auths, helpers, store = data, {}, None
    else:
        auths = _object(data.get("auths"), path, "auths")
        helpers = _object(data.get("credHelpers"), path, "credHelpers")
        store = data.get("credsStore")

    helper_key = _registry_key(helpers, registry, auth_file.legacy)
    if helper_key is not None:
        where = f"credHelpers[{shown(helper_key)}] in {path}"
        name = _helper_name(helpers[helper_key], where)
        return _ask_helper(runner, name, helper_key, registry, env, where)

    marker = None
    key, scoped = _auth_key(auths, registry, repository, auth_file.legacy)
    if key is not None:
        found = _decode_entry(auths[key], path, key)
        if found is not None:
            return found
        # An entry without a credential is what docker leaves beside a credsStore: its key
        # is the server URL the store holds the credential under.
        marker = None if scoped else key

    if store is None or store == "":
        return None
    where = f"credsStore in {path}"
    name = _helper_name(store, where)
    server = marker or (DOCKER_HUB_KEY if registry == DOCKER_HUB else registry)
    return _ask_helper(runner, name, server, registry, env, where)


def _read(auth_file: AuthFile) -> dict[str, Any] | None:
    """The file's JSON object; None when it does not exist. An empty file is an empty one
    (docker treats it so; a `touch`ed file is common)."""
    import json

    path = auth_file.path
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        if auth_file.named_by is not None:
            raise ConfigError(
                f"{auth_file.named_by} names {path}, which does not exist; log in with "
                f"`podman login --authfile {path}`, or unset {auth_file.named_by}"
            ) from None
        return None
    except IsADirectoryError:
        raise ConfigError(
            f"{path} is a directory, not a registry auth file; move it away"
        ) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"{path} cannot be read ({reason}); fix its permissions or move it away"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path} line {line}: not UTF-8 text; fix it, or move it away and log in again"
        ) from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # exc.msg names the kind of fault only ("Expecting ',' delimiter"): never the text,
        # which may be a secret.
        raise ConfigError(
            f"{path} line {exc.lineno} column {exc.colno}: not valid JSON ({exc.msg}); "
            "fix it, or move it away and log in again"
        ) from None
    except (ValueError, RecursionError):
        raise ConfigError(
            f"{path}: not a JSON document a registry auth file can be; fix it, or move it "
            "away and log in again"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f'{path}: holds a JSON {_json_type(data)}, not an object with "auths"; fix it, '
            "or move it away and log in again"
        )
    return data


def _object(value: object, path: Path, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: {key!r} is a JSON {_json_type(value)}, not an object; fix it, or move "
            "the file away and log in again"
        )
    return value


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "object"


def _key_host(key: str, legacy: bool) -> str | None:
    """The registry a registry-level key names, as docker and containers/image read keys
    older tools wrote: a URL (https://index.docker.io/v1/) or a host with an API path
    (registry/v1/) stands for its host, and docker.io's aliases are one registry. None for a
    repository key (registry/namespace/repo), which only an exact match uses."""
    rest = key
    for scheme in ("https://", "http://"):
        if key.lower().startswith(scheme):
            rest = key[len(scheme) :]
            break
    host, slash, tail = rest.partition("/")
    if slash and not (legacy or rest != key or tail.strip("/") in ("", "v1", "v2")):
        return None
    return _registry_name(host.lower())


def _registry_key(keys: Mapping[str, Any], registry: str, legacy: bool) -> str | None:
    """The key of `keys` for `registry` itself: the exact one, else the first (in the file's
    order) of the older spellings."""
    if registry in keys:
        return registry
    wanted = registry.lower()
    for key in keys:
        if isinstance(key, str) and _key_host(key, legacy) == wanted:
            return key
    return None


def _auth_key(
    auths: Mapping[str, Any], registry: str, repository: str, legacy: bool
) -> tuple[str | None, bool]:
    """(the `auths` key for `repository` on `registry`, whether it is a repository key):
    the longest repository prefix first, as containers-auth.json(5) orders them."""
    if not legacy and repository:
        parts = repository.strip("/").split("/")
        for end in range(len(parts), 0, -1):
            key = f"{registry}/{'/'.join(parts[:end])}"
            if key in auths:
                return key, True
    return _registry_key(auths, registry, legacy), False


def _decode_entry(entry: object, path: Path, key: str) -> Credential | None:
    """The credential in one `auths` entry; None for an entry without one (docker's marker
    beside a credsStore, a user logged in with an empty password)."""
    import base64
    import binascii

    at = f"{path}: auths[{shown(key)}]"
    if not isinstance(entry, dict):
        raise ConfigError(
            f"{at} is a JSON {_json_type(entry)}, not an object; fix it, or log in again"
        )
    values: dict[str, str] = {}
    for name in ("auth", "identitytoken", "username", "password"):
        value = entry.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ConfigError(
                f"{at}.{name} is a JSON {_json_type(value)}, not a string; fix it, or log in again"
            )
        values[name] = value
    username = values.get("username", "")
    password = values.get("password", "")
    auth = values.get("auth", "").strip()
    if auth:
        try:
            # Tools that drop base64's padding exist; the padding carries nothing.
            decoded = base64.b64decode(auth + "=" * (-len(auth) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(
                f"{at}.auth is not base64; log in again, or fix it: base64 of user:password"
            ) from None
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(
                f"{at}.auth does not decode to text; log in again, or fix it: base64 of "
                "user:password"
            ) from None
        username, colon, password = text.partition(":")
        if not colon:
            raise ConfigError(
                f"{at}.auth decodes to no user:password pair (no colon); log in again, or "
                "fix it: base64 of user:password"
            )
        if not username:
            raise ConfigError(
                f"{at}.auth has an empty user name; log in again, or fix it: base64 of "
                "user:password"
            )
        password = password.strip("\x00")  # as docker: some writers padded with NULs
    token = values.get("identitytoken") or None
    if token is None and not (username and password):
        return None
    return Credential(username, password, token, source=f"{path} auths[{shown(key)}]")


def _helper_name(value: object, where: str) -> str:
    if not isinstance(value, str) or _HELPER_NAME.fullmatch(value) is None:
        what = shown(value) if not isinstance(value, str) else "it"
        raise ConfigError(
            f"{where}: {what} is not a credential helper's name (the part after "
            f"{HELPER_PREFIX}: letters, digits, . _ + -); fix it or remove it"
        )
    return value


def _ask_helper(
    runner: RunHelper,
    name: str,
    server: str,
    registry: str,
    env: Mapping[str, str],
    where: str,
) -> Credential | None:
    try:
        answer = runner(name, server, env)
    except HelperError as exc:
        raise CredentialsError(
            f"registry {registry}: {exc.problem} ({where} names it); {exc.hint}, or remove "
            "that entry"
        ) from None
    if answer is None:
        return None
    username, secret = answer
    source = f"{HELPER_PREFIX}{name} ({where})"
    if username == TOKEN_USERNAME:
        return Credential("", "", secret, source=source) if secret else None
    if not secret:
        return None
    return Credential(username, secret, source=source)


def run_credential_helper(
    name: str, server_url: str, env: Mapping[str, str], *, timeout: float = HELPER_TIMEOUT
) -> tuple[str, str] | None:
    """Run `docker-credential-NAME get` (found on env's PATH) with `server_url` on stdin:
    (Username, Secret), or None when it holds nothing for the server. Its environment is
    `env` without shoal's own variables (SHOAL_IMAGE_PASSWORD and the like are none of its
    business); the rest stays, since helpers such as ecr-login, gcr and acr-env read their
    cloud's credentials from it. Killed with its children after `timeout` seconds."""
    import shutil
    import subprocess

    program = HELPER_PREFIX + name
    found = shutil.which(program, path=env.get("PATH") or os.defpath)
    if found is None:
        raise HelperError(f"{program} is not on PATH", "install it, or put its directory on PATH")
    child_env = {k: v for k, v in env.items() if not k.startswith("SHOAL_")}
    try:
        proc = subprocess.Popen(
            [found, "get"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            # Its own process group, so a timeout kills what it started too (a shell
            # script's `sleep` would otherwise hold the pipes open).
            start_new_session=True,
        )
    except OSError as exc:
        raise HelperError(
            f"{program} could not be started ({exc.strerror or type(exc).__name__})",
            f"check that {found} is an executable program",
        ) from None
    try:
        out, err = proc.communicate(server_url.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise HelperError(
            f"{program} get did not answer within {timeout:g} s",
            "check that it answers in this session (a locked keychain or a password prompt "
            "waits for ever)",
        ) from None
    except BaseException:
        _stop(proc)
        raise
    return _helper_answer(program, server_url, proc.returncode, out, err, env)


def _stop(proc: Any) -> None:
    import contextlib
    import signal
    import subprocess

    with contextlib.suppress(OSError):  # it may have exited just now
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:
        # A grandchild that left the group holds the pipes: stop waiting for them.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()


def _helper_answer(
    program: str, server_url: str, status: int, out: bytes, err: bytes, env: Mapping[str, str]
) -> tuple[str, str] | None:
    import json
    import shlex

    from providers.core.errors import environment_secrets, one_line

    said = out.decode("utf-8", "replace").strip()
    complained = err.decode("utf-8", "replace").strip()
    if status != 0:
        if HELPER_NOT_FOUND in (said, complained):
            return None
        if status < 0:
            problem = f"{program} get was killed by signal {-status}"
        else:
            problem = f"{program} get failed with exit status {status}"
        message = said or complained
        # Its error message helps; anything that may be an answer (a secret) is not quoted.
        if message and "secret" not in message.lower():
            problem += ": " + one_line(message, environment_secrets(env), limit=200)
        check = f"printf %s {shlex.quote(server_url)} | {program} get"
        raise HelperError(problem, f"run `{check}` to see why")
    try:
        answer = json.loads(said)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not all(
        isinstance(answer.get(field, ""), str) for field in ("Username", "Secret")
    ):
        raise HelperError(
            f"{program} get answered something other than the JSON it should print "
            '({"ServerURL": ..., "Username": ..., "Secret": ...})',
            "check that it is a docker credential helper and works on its own",
        )
    username, secret = answer.get("Username", ""), answer.get("Secret", "")
    if not username and not secret:
        return None
    return username, secret
