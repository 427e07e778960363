"""What shoal reads of a kubeconfig file, as models: its clusters, users and contexts.

Checked as kubectl decodes a file: every entry's fields must have their types (a string, a
boolean, a list, base64 for `*-data`), in the entries a context uses or not; a null is an
unset field; a key shoal does not read is ignored (newer kubectl fields, other tools'
extensions, `preferences`). What a value means is checked where a context is resolved, for
the entries it uses only, as kubectl does: the server URL (`endpoint`), files and the exec
stanza's rules (`credentials`), the names a context refers to (`kubeconfig`).

Imported when a kubeconfig is loaded, never before: it imports pydantic
(providers/core/schema.py).

Docs: https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field, PlainValidator, model_validator
from pydantic_core import PydanticCustomError

from providers.core.errors import ConfigError
from providers.core.schema import Place, kind_of, validate
from providers.core.strict import Strict


def _base64(value: Any) -> bytes | None:
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "Input should be a valid string")
    if not value:
        return None
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64; re-export the kubeconfig") from None


# A `*-data` field: base64 text in the file, its bytes here.
Data = Annotated[bytes | None, PlainValidator(_base64)]
Name = Annotated[str, Field(min_length=1)]


class Lenient(Strict):
    """Types as strict as shoal's other input; unknown keys ignored and nulls unset, as
    kubectl reads a kubeconfig."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data


class Extension(Lenient):
    name: str = ""
    extension: Any = None


class Cluster(Lenient):
    server: str = ""
    certificate_authority: str = Field("", alias="certificate-authority")
    certificate_authority_data: Data = Field(None, alias="certificate-authority-data")
    insecure_skip_tls_verify: bool = Field(False, alias="insecure-skip-tls-verify")
    tls_server_name: str = Field("", alias="tls-server-name")
    extensions: list[Extension] = []


class ExecEnv(Lenient):
    name: str
    value: str


class Exec(Lenient):
    """An exec credential plugin's stanza; its rules (a command, a known apiVersion, the
    interactive mode) are `credentials`' to check, for the user a context uses."""

    command: str = ""
    api_version: str = Field("", alias="apiVersion")
    args: list[str] = []
    env: list[ExecEnv] = []
    interactive_mode: str = Field("", alias="interactiveMode")
    provide_cluster_info: bool = Field(False, alias="provideClusterInfo")
    install_hint: str = Field("", alias="installHint")


class AuthProvider(Lenient):
    name: str = "?"


class User(Lenient):
    secret: ClassVar[bool] = True  # an error never quotes a value given here

    token: str = ""
    token_file: str = Field("", alias="tokenFile")
    client_certificate: str = Field("", alias="client-certificate")
    client_certificate_data: Data = Field(None, alias="client-certificate-data")
    client_key: str = Field("", alias="client-key")
    client_key_data: Data = Field(None, alias="client-key-data")
    username: str = ""
    password: str = ""
    exec: Exec | None = None
    auth_provider: AuthProvider | None = Field(None, alias="auth-provider")


class Context(Lenient):
    cluster: str = ""
    user: str = ""
    namespace: str = ""


class NamedCluster(Lenient):
    name: Name
    cluster: Cluster = Field(default_factory=Cluster)


class NamedUser(Lenient):
    name: Name
    user: User = Field(default_factory=User)


class NamedContext(Lenient):
    name: Name
    context: Context = Field(default_factory=Context)


class Kubeconfig(Lenient):
    clusters: list[NamedCluster] = []
    users: list[NamedUser] = []
    contexts: list[NamedContext] = []
    current_context: str = Field("", alias="current-context")


def check(data: Any, path: Path) -> Kubeconfig:
    """A kubeconfig file's YAML as a model, or a ConfigError naming the file and field
    (`PATH: users[0].user.exec.args must be a list, got a string`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a kubeconfig must be a YAML mapping, got {kind_of(data)}")
    return validate(Kubeconfig, data, Place(ConfigError, str(path), sentence=True))
