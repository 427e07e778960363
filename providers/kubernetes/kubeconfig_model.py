"""What shoal reads of a kubeconfig file, as models: its clusters, users and contexts.

Checked as kubectl decodes a file: every entry's fields must have their types (a string, a
boolean, a list, base64 for `*-data`), in the entries a context uses or not; a null is an
unset field; a key shoal does not read is ignored (newer kubectl fields, other tools'
extensions, `preferences`). What a value means is checked where a context is resolved, for
the entries it uses only, as kubectl does: the server URL (`endpoint`), files and the exec
stanza's rules (`credentials`), the names a context refers to (`kubeconfig`).

A shape check, so a small one: each model lists its fields (attribute, key in the file,
shape, default) and `_read` walks them in that order, saying the first thing wrong the way
shoal's pydantic-checked input says it (providers/core/schema.py, in sentences: `PATH:
users[0].user.exec.args must be a list, got a string`; never a value under `users[].user`).
pydantic and its models cost ~80 ms a run to import and build, for a file of a few fields.

Docs: https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from providers.core.errors import ConfigError
from providers.core.schema import given, kind_of

M = TypeVar("M", bound="_Model")
Loc = tuple[int | str, ...]


class _Wrong(Exception):
    """The first thing wrong: where, and what (a sentence about the field)."""

    def __init__(self, loc: Loc, text: str) -> None:
        super().__init__(text)
        self.loc, self.text = loc, text


def _got(value: Any, secret: bool) -> str:
    if secret:  # its kind, never the value
        return f", got {kind_of(value)} (the value is not shown: it may be a credential)"
    return f", got {'a mapping' if isinstance(value, Mapping) else given(value)}"


# A shape reads a value that is there (not null) at `loc`; `secret`: under a user entry.
Shape = Callable[[Any, Loc, bool], Any]


def _str(value: Any, loc: Loc, secret: bool) -> str:
    if not isinstance(value, str):
        raise _Wrong(loc, "must be a string" + _got(value, secret))
    return value


def _name(value: Any, loc: Loc, secret: bool) -> str:
    if not _str(value, loc, secret):
        raise _Wrong(loc, "must not be empty")
    return value  # type: ignore[no-any-return]


def _bool(value: Any, loc: Loc, secret: bool) -> bool:
    if not isinstance(value, bool):
        raise _Wrong(loc, "must be true or false" + _got(value, secret))
    return value


def _data(value: Any, loc: Loc, secret: bool) -> bytes | None:
    """A `*-data` field: base64 text in the file, its bytes here."""
    if not _str(value, loc, secret):
        return None
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise _Wrong(loc, "is not valid base64; re-export the kubeconfig") from None


def _any(value: Any, loc: Loc, secret: bool) -> Any:
    return value


def _list(item: Shape) -> Shape:
    def read(value: Any, loc: Loc, secret: bool) -> list[Any]:
        if not isinstance(value, list):
            raise _Wrong(loc, "must be a list" + _got(value, secret))
        return [item(one, (*loc, i), secret) for i, one in enumerate(value)]

    return read


def _model(cls: type[M]) -> Shape:
    return lambda value, loc, secret: _read(cls, value, loc, secret)


_REQUIRED: Any = object()


class _Model:
    """A mapping of the file. FIELDS: (attribute, key, shape, default: a value, a callable
    making one, or _REQUIRED); keys not listed are ignored, a null is the default."""

    FIELDS: ClassVar[tuple[tuple[str, str, Shape, Any], ...]] = ()
    secret: ClassVar[bool] = False  # an error never quotes a value given here

    def __init__(self) -> None:
        for attribute, _, _, default in self.FIELDS:
            setattr(self, attribute, default() if callable(default) else default)


def _read(cls: type[M], data: Any, loc: Loc, secret: bool) -> M:
    secret = secret or cls.secret  # a user entry given as a string may be its token
    if not isinstance(data, dict):
        raise _Wrong(loc, "must be a mapping" + _got(data, secret))
    obj = cls.__new__(cls)
    for attribute, key, shape, default in cls.FIELDS:
        value = data.get(key)
        if value is not None:
            value = shape(value, (*loc, key), secret)
        elif default is _REQUIRED:
            raise _Wrong((*loc, key), "is missing")
        else:
            value = default() if callable(default) else default
        setattr(obj, attribute, value)
    return obj


class Extension(_Model):
    name: str
    extension: Any
    FIELDS = (("name", "name", _str, ""), ("extension", "extension", _any, None))


class Cluster(_Model):
    server: str
    certificate_authority: str
    certificate_authority_data: bytes | None
    insecure_skip_tls_verify: bool
    tls_server_name: str
    extensions: list[Extension]
    FIELDS = (
        ("server", "server", _str, ""),
        ("certificate_authority", "certificate-authority", _str, ""),
        ("certificate_authority_data", "certificate-authority-data", _data, None),
        ("insecure_skip_tls_verify", "insecure-skip-tls-verify", _bool, False),
        ("tls_server_name", "tls-server-name", _str, ""),
        ("extensions", "extensions", _list(_model(Extension)), list),
    )


class ExecEnv(_Model):
    name: str
    value: str
    FIELDS = (("name", "name", _str, _REQUIRED), ("value", "value", _str, _REQUIRED))


class Exec(_Model):
    """An exec credential plugin's stanza; its rules (a command, a known apiVersion, the
    interactive mode) are `credentials`' to check, for the user a context uses."""

    command: str
    api_version: str
    args: list[str]
    env: list[ExecEnv]
    interactive_mode: str
    provide_cluster_info: bool
    install_hint: str
    FIELDS = (
        ("command", "command", _str, ""),
        ("api_version", "apiVersion", _str, ""),
        ("args", "args", _list(_str), list),
        ("env", "env", _list(_model(ExecEnv)), list),
        ("interactive_mode", "interactiveMode", _str, ""),
        ("provide_cluster_info", "provideClusterInfo", _bool, False),
        ("install_hint", "installHint", _str, ""),
    )


class AuthProvider(_Model):
    name: str
    FIELDS = (("name", "name", _str, "?"),)


class User(_Model):
    secret = True

    token: str
    token_file: str
    client_certificate: str
    client_certificate_data: bytes | None
    client_key: str
    client_key_data: bytes | None
    username: str
    password: str
    exec: Exec | None
    auth_provider: AuthProvider | None
    FIELDS = (
        ("token", "token", _str, ""),
        ("token_file", "tokenFile", _str, ""),
        ("client_certificate", "client-certificate", _str, ""),
        ("client_certificate_data", "client-certificate-data", _data, None),
        ("client_key", "client-key", _str, ""),
        ("client_key_data", "client-key-data", _data, None),
        ("username", "username", _str, ""),
        ("password", "password", _str, ""),
        ("exec", "exec", _model(Exec), None),
        ("auth_provider", "auth-provider", _model(AuthProvider), None),
    )


class Context(_Model):
    cluster: str
    user: str
    namespace: str
    FIELDS = (
        ("cluster", "cluster", _str, ""),
        ("user", "user", _str, ""),
        ("namespace", "namespace", _str, ""),
    )


class NamedCluster(_Model):
    name: str
    cluster: Cluster
    FIELDS = (("name", "name", _name, _REQUIRED), ("cluster", "cluster", _model(Cluster), Cluster))


class NamedUser(_Model):
    name: str
    user: User
    FIELDS = (("name", "name", _name, _REQUIRED), ("user", "user", _model(User), User))


class NamedContext(_Model):
    name: str
    context: Context
    FIELDS = (("name", "name", _name, _REQUIRED), ("context", "context", _model(Context), Context))


class Kubeconfig(_Model):
    clusters: list[NamedCluster]
    users: list[NamedUser]
    contexts: list[NamedContext]
    current_context: str
    FIELDS = (
        ("clusters", "clusters", _list(_model(NamedCluster)), list),
        ("users", "users", _list(_model(NamedUser)), list),
        ("contexts", "contexts", _list(_model(NamedContext)), list),
        ("current_context", "current-context", _str, ""),
    )


def check(data: Any, path: Path) -> Kubeconfig:
    """A kubeconfig file's YAML as a model, or a ConfigError naming the file and field
    (`PATH: users[0].user.exec.args must be a list, got a string`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a kubeconfig must be a YAML mapping, got {kind_of(data)}")
    try:
        return _read(Kubeconfig, data, (), False)
    except _Wrong as wrong:
        raise ConfigError(f"{path}: {_where(wrong.loc)} {wrong.text}") from None


def _where(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out
