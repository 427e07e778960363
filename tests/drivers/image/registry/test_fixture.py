"""The registry fixtures work: each mode answers real HTTP as a registry client expects, the
pushed images are what the layouts say, and nothing outlives a registry."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import ssl
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.drivers.image.registry.conftest import Samples
from tests.drivers.image.registry.layouts import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    INDEX,
    LAYER_GZIP,
    LAYER_ZSTD,
    MANIFEST,
    Layout,
    PushFailed,
    push,
    sized_image,
)
from tests.drivers.image.registry.server import Registry
from tests.drivers.image.registry.tokens import decode_jwt

ACCEPT = ", ".join((INDEX, MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def get_manifest(client: httpx.Client, registry: Registry, name: str, ref: str) -> httpx.Response:
    return client.get(f"{registry.url}/v2/{name}/manifests/{ref}", headers={"Accept": ACCEPT})


def get_blob(client: httpx.Client, registry: Registry, name: str, digest: str) -> bytes:
    answer = client.get(f"{registry.url}/v2/{name}/blobs/{digest}", follow_redirects=True)
    assert answer.status_code == 200, answer.text
    return answer.content


def challenge(answer: httpx.Response) -> dict[str, str]:
    """WWW-Authenticate's parameters (plus "scheme")."""
    scheme, _, rest = answer.headers["www-authenticate"].partition(" ")
    params = {"scheme": scheme}
    for part in rest.split('",'):
        key, _, value = part.partition("=")
        params[key.strip()] = value.strip().strip('"')
    return params


def platform_of(described: dict[str, str]) -> str:
    parts = (described["os"], described["architecture"], described.get("variant"))
    return "/".join(p for p in parts if p)


def untar(layer: bytes, media_type: str) -> tuple[bytes, dict[str, tarfile.TarInfo]]:
    if media_type == LAYER_GZIP:
        raw = gzip.decompress(layer)
    else:
        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(layer)).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return raw, {m.name.rstrip("/"): m for m in tar.getmembers()}


# -- no auth -----------------------------------------------------------------------------------


def test_plain_registry_serves_the_pushed_image_blob_for_blob(
    registry_plain: Registry, samples: Samples
) -> None:
    pushed = samples.push(registry_plain, "app/sample:1.0")
    assert pushed == f"127.0.0.1:{registry_plain.port}/app/sample:1.0"
    image = samples.image
    with httpx.Client() as client:
        answer = get_manifest(client, registry_plain, "app/sample", "1.0")
        assert answer.status_code == 200
        assert answer.headers["content-type"] == MANIFEST
        assert answer.headers["docker-content-digest"] == image.digest == sha256(answer.content)
        manifest = answer.json()
        assert [layer["mediaType"] for layer in manifest["layers"]] == [
            LAYER_GZIP, LAYER_ZSTD, LAYER_GZIP,
        ]  # fmt: skip
        config = get_blob(client, registry_plain, "app/sample", manifest["config"]["digest"])
        assert sha256(config) == image.config.digest
        described = json.loads(config)
        assert described["config"]["Entrypoint"] == ["/app/main.sh"]
        assert described["config"]["Cmd"] == ["--serve", "8080"]
        assert "GREETING=hello world" in described["config"]["Env"]
        assert described["config"]["WorkingDir"] == "/app"
        assert described["config"]["User"] == "1000:1000"
        assert (described["os"], described["architecture"]) == ("linux", "amd64")
        for layer, given in zip(manifest["layers"], image.layers, strict=True):
            data = get_blob(client, registry_plain, "app/sample", layer["digest"])
            assert sha256(data) == layer["digest"] == given.digest
            assert len(data) == layer["size"] == given.size
            raw, _ = untar(data, layer["mediaType"])
            assert sha256(raw) == given.diff_id
        assert described["rootfs"]["diff_ids"] == [layer.diff_id for layer in image.layers]
        # What a resuming client relies on: HEAD's size and digest, Range answered with 206.
        first = image.layers[0]
        blob_url = f"{registry_plain.url}/v2/app/sample/blobs/{first.digest}"
        head = client.head(blob_url)
        assert head.headers["content-length"] == str(first.size)
        assert head.headers["docker-content-digest"] == first.digest
        tail = client.get(blob_url, headers={"Range": "bytes=100-"})
        assert tail.status_code == 206 and tail.content == first.blob.read()[100:]
        missing = client.get(f"{registry_plain.url}/v2/app/sample/blobs/sha256:{'0' * 64}")
        assert missing.status_code == 404


def test_layers_hold_whiteouts_an_opaque_dir_links_and_owners(
    registry_plain: Registry, samples: Samples
) -> None:
    samples.push(registry_plain, "app/sample:1.0")
    members = []
    with httpx.Client() as client:
        for layer in samples.image.layers:
            data = get_blob(client, registry_plain, "app/sample", layer.digest)
            members.append(untar(data, layer.media_type)[1])
    base, update, top = members
    assert base["bin/sh"].issym() and base["bin/sh"].linkname == "tool"
    assert base["bin/tool-hard"].islnk() and base["bin/tool-hard"].linkname == "bin/tool"
    assert base["tmp"].isdir() and base["tmp"].mode == 0o1777
    assert "etc/.wh.removed.conf" in update and "opt/.wh.gone" in update
    assert "var/lib/old/.wh..wh..opq" in update
    assert top["etc/alternatives/main"].linkname == "/app/main.sh"
    assert (top["home/user/.profile"].uid, top["home/user/.profile"].mode) == (1000, 0o600)
    tree = samples.image.expected
    assert tree["etc/hostname"].data == b"updated\n"
    assert "etc/removed.conf" not in tree and "opt/gone" not in tree
    assert [p for p in tree if p.startswith("var/lib/old/")] == ["var/lib/old/c"]
    assert tree["bin/tool-hard"].kind == "hardlink" and tree["bin/tool-hard"].target == "bin/tool"


def test_multi_platform_index_lists_both_platforms(
    registry_plain: Registry, samples: Samples
) -> None:
    samples.push(registry_plain, "app/multi:2", tag="multi")
    with httpx.Client() as client:
        answer = get_manifest(client, registry_plain, "app/multi", "2")
        assert answer.headers["content-type"] == INDEX
        assert answer.headers["docker-content-digest"] == samples.index.digest
        index = answer.json()
        platforms = {platform_of(m["platform"]): m["digest"] for m in index["manifests"]}
        assert set(platforms) == {"linux/amd64", "linux/arm64/v8"}
        layers = {}
        for platform, digest in platforms.items():
            manifest = get_manifest(client, registry_plain, "app/multi", digest)
            assert manifest.headers["docker-content-digest"] == digest == sha256(manifest.content)
            assert digest == samples.index.for_platform(platform).digest
            layers[platform] = [layer["digest"] for layer in manifest.json()["layers"]]
            own = get_blob(client, registry_plain, "app/multi", layers[platform][1])
            assert untar(own, LAYER_ZSTD)[0].count(f"{platform}\n".encode()) == 1
    assert layers["linux/amd64"][0] == layers["linux/arm64/v8"][0]  # a shared base layer
    assert layers["linux/amd64"][1] != layers["linux/arm64/v8"][1]


def test_gzip_only_index_pushed_as_docker_schema_2_is_a_manifest_list(
    registry_plain: Registry, samples: Samples
) -> None:
    samples.push(registry_plain, "app/docker:1", tag="multi-gzip", format="v2s2")
    with httpx.Client() as client:
        answer = get_manifest(client, registry_plain, "app/docker", "1")
        assert answer.headers["content-type"] == DOCKER_LIST
        first = answer.json()["manifests"][0]
        assert first["mediaType"] == DOCKER_MANIFEST
        manifest = get_manifest(client, registry_plain, "app/docker", first["digest"]).json()
        assert (
            manifest["layers"][0]["mediaType"]
            == "application/vnd.docker.image.rootfs.diff.tar.gzip"
        )


# -- htpasswd ------------------------------------------------------------------------------------


def test_basic_registry_refuses_anonymous_and_wrong_password(
    registry_basic: Registry, samples: Samples
) -> None:
    samples.push(registry_basic, "app/sample:1.0")
    assert registry_basic.username and registry_basic.password
    with httpx.Client() as client:
        anonymous = get_manifest(client, registry_basic, "app/sample", "1.0")
        assert anonymous.status_code == 401
        assert challenge(anonymous) == {"scheme": "Basic", "realm": "shoal-test-registry"}
        wrong = client.get(
            f"{registry_basic.url}/v2/app/sample/manifests/1.0",
            auth=(registry_basic.username, "no"),
        )
        assert wrong.status_code == 401
    with httpx.Client(auth=(registry_basic.username, registry_basic.password)) as client:
        answer = get_manifest(client, registry_basic, "app/sample", "1.0")
        assert answer.status_code == 200
        assert answer.headers["docker-content-digest"] == samples.image.digest
        layer = samples.image.layers[1]
        assert sha256(get_blob(client, registry_basic, "app/sample", layer.digest)) == layer.digest


def test_push_failure_names_no_password(registry_basic: Registry, samples: Samples) -> None:
    assert registry_basic.password is not None
    wrong = f"{registry_basic.username}:not-{registry_basic.password}"
    with pytest.raises(PushFailed) as failed:
        push(samples.layout, "app/refused:1", registry_basic, creds=wrong, tag="1.0")
    assert "401" in str(failed.value) or "unauthorized" in str(failed.value).lower()
    assert wrong.partition(":")[2] not in str(failed.value)
    assert registry_basic.password not in repr(registry_basic)


# -- TLS -----------------------------------------------------------------------------------------


def test_tls_registry_verifies_against_the_throwaway_ca(
    registry_tls: Registry, samples: Samples, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples.push(registry_tls, "app/sample:1.0")
    assert registry_tls.url.startswith("https://127.0.0.1:")
    assert registry_tls.ca_file is not None and registry_tls.cert_dir is not None
    assert (registry_tls.cert_dir / "ca.crt").read_bytes() == registry_tls.ca_file.read_bytes()
    with (
        httpx.Client(verify=ssl.create_default_context()) as client,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(registry_tls.url + "/v2/")  # the system's CAs do not know it
    context = ssl.create_default_context(cafile=str(registry_tls.ca_file))
    for host in ("127.0.0.1", "localhost"):
        url = registry_tls.url.replace("127.0.0.1", host)
        with httpx.Client(verify=context) as client:
            answer = client.get(f"{url}/v2/app/sample/manifests/1.0", headers={"Accept": ACCEPT})
            assert answer.status_code == 200 and sha256(answer.content) == samples.image.digest
    # `env` is how a shoal process is told to trust it: httpx's default context reads it.
    assert registry_tls.env == {"SSL_CERT_FILE": str(registry_tls.ca_file)}
    for key, value in registry_tls.env.items():
        monkeypatch.setenv(key, value)
    with httpx.Client() as client:
        blob = samples.image.layers[0].digest
        assert sha256(get_blob(client, registry_tls, "app/sample", blob)) == blob


# -- token auth ----------------------------------------------------------------------------------


def fetch_token(
    registry: Registry, scope: str, auth: tuple[str, str] | None = None, **params: str
) -> httpx.Response:
    assert registry.token is not None
    query = {"service": registry.token.service, "scope": scope, **params}
    return httpx.get(registry.token.realm, params=query, auth=auth)


def test_token_flow_gives_a_jwt_the_registry_accepts(
    registry_token: Registry, samples: Samples
) -> None:
    samples.push(registry_token, "app/sample:1.0")
    server = registry_token.token
    assert server is not None and registry_token.username and registry_token.password
    with httpx.Client() as client:
        anonymous = get_manifest(client, registry_token, "app/sample", "1.0")
        assert anonymous.status_code == 401
        asked = challenge(anonymous)
        assert asked == {
            "scheme": "Bearer",
            "realm": server.realm,
            "service": server.service,
            "scope": "repository:app/sample:pull",
        }
        before = server.count
        issued = fetch_token(
            registry_token, asked["scope"], (registry_token.username, registry_token.password)
        )
        assert issued.status_code == 200 and server.count == before + 1
        body = issued.json()
        assert body["token"] == body["access_token"] and body["expires_in"] == server.expires_in
        header, claims = decode_jwt(body["token"])
        assert header["alg"] == "RS256" and server.verify(body["token"])
        assert claims["access"] == [
            {"type": "repository", "name": "app/sample", "actions": ["pull"]}
        ]
        assert (claims["iss"], claims["aud"], claims["sub"]) == (
            server.issuer, server.service, registry_token.username,
        )  # fmt: skip
        bearer = {"Authorization": f"Bearer {body['token']}", "Accept": ACCEPT}
        answer = client.get(f"{registry_token.url}/v2/app/sample/manifests/1.0", headers=bearer)
        assert answer.status_code == 200
        assert answer.headers["docker-content-digest"] == samples.image.digest
        layer = samples.image.layers[2]
        blob = client.get(
            f"{registry_token.url}/v2/app/sample/blobs/{layer.digest}", headers=bearer
        )
        assert sha256(blob.content) == layer.digest
        # The token is for app/sample only.
        other = client.get(f"{registry_token.url}/v2/app/other/manifests/1.0", headers=bearer)
        assert other.status_code == 401
    user_requests = [r for r in server.requests if r.user == registry_token.username]
    assert user_requests and all(r.authenticated for r in user_requests)


def test_token_server_refuses_bad_credentials_and_grants_by_user(
    registry_token: Registry, samples: Samples
) -> None:
    samples.push(registry_token, "app/sample:1.0")
    server = registry_token.token
    assert server is not None and registry_token.username
    scope = "repository:app/sample:pull,push"
    wrong = fetch_token(registry_token, scope, (registry_token.username, "wrong"))
    assert wrong.status_code == 401
    assert server.requests[-1].user == registry_token.username
    assert not server.requests[-1].authenticated
    anonymous = fetch_token(registry_token, scope).json()
    assert decode_jwt(anonymous["token"])[1]["access"] == []
    reader = fetch_token(registry_token, scope, ("reader", registry_token.users["reader"])).json()
    assert decode_jwt(reader["token"])[1]["access"][0]["actions"] == ["pull"]
    with httpx.Client() as client:
        url = f"{registry_token.url}/v2/app/sample"
        nothing = {"Authorization": f"Bearer {anonymous['token']}", "Accept": ACCEPT}
        assert client.get(f"{url}/manifests/1.0", headers=nothing).status_code == 401
        pull = {"Authorization": f"Bearer {reader['token']}", "Accept": ACCEPT}
        assert client.get(f"{url}/manifests/1.0", headers=pull).status_code == 200
        upload = client.post(f"{url}/blobs/uploads/", headers=pull)
        assert upload.status_code == 401  # pull only: no push
        assert "insufficient_scope" in upload.headers["www-authenticate"]


def test_refresh_token_and_expired_token(registry_token: Registry, samples: Samples) -> None:
    samples.push(registry_token, "app/sample:1.0")
    server = registry_token.token
    assert server is not None and registry_token.username and registry_token.password
    scope = "repository:app/sample:pull"
    offline = fetch_token(
        registry_token, scope, (registry_token.username, registry_token.password),
        offline_token="true", client_id="shoal-tests",
    ).json()  # fmt: skip
    refresh = offline["refresh_token"]
    oauth = httpx.post(
        server.realm,
        data={"grant_type": "refresh_token", "refresh_token": refresh, "service": server.service,
              "scope": scope, "client_id": "shoal-tests"},
    )  # fmt: skip
    assert oauth.status_code == 200
    token = oauth.json()["access_token"]
    assert server.requests[-1].grant_type == "refresh_token"
    url = f"{registry_token.url}/v2/app/sample/manifests/1.0"
    # Without an Accept naming OCI, distribution 2.8 answers 404 for an OCI manifest.
    answer = httpx.get(url, headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT})
    assert answer.status_code == 200
    refused = httpx.post(
        server.realm,
        data={"grant_type": "refresh_token", "refresh_token": "rt-unknown",
              "service": server.service, "scope": scope},
    )  # fmt: skip
    assert refused.status_code == 401
    expired = server.mint(
        [{"type": "repository", "name": "app/sample", "actions": ["pull"]}], lifetime=-1
    )
    answer = httpx.get(url, headers={"Authorization": f"Bearer {expired}", "Accept": ACCEPT})
    assert answer.status_code == 401


def test_short_lived_tokens_die_when_the_server_says(
    make_registry: Callable[..., Registry], samples: Samples
) -> None:
    registry = make_registry("token")
    samples.push(registry, "app/short:1", tag="1.0")
    server = registry.token
    assert server is not None and registry.username and registry.password
    assert server.count >= 1  # skopeo asked for its push token
    server.expires_in, server.lifetime = 1, 1
    token = fetch_token(
        registry, "repository:app/short:pull", (registry.username, registry.password)
    ).json()
    assert token["expires_in"] == 1
    url = f"{registry.url}/v2/app/short/manifests/1"
    headers = {"Authorization": f"Bearer {token['token']}", "Accept": ACCEPT}
    assert httpx.get(url, headers=headers).status_code == 200, "a fresh token works"
    time.sleep(2.05)  # exp is in whole seconds, rounded up
    assert httpx.get(url, headers=headers).status_code == 401
    server.statuses.append(503)
    again = fetch_token(registry, "repository:app/short:pull", (registry.username, "x"))
    assert again.status_code == 503  # a queued failure goes first


# -- lifecycle and the benchmark image ---------------------------------------------------------


def test_stop_kills_the_registry_and_removes_its_directory(
    make_registry: Callable[..., Registry],
) -> None:
    registry = make_registry("token")
    assert registry.process is not None and registry.token is not None
    pid, directory, port = registry.process.pid, registry.dir, registry.token.port
    assert directory.is_dir() and "listening on" in registry.log()
    registry.stop()
    assert registry.process.poll() is not None
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    assert not directory.exists()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/token")
    registry.stop()  # idempotent


def test_sized_image_is_five_incompressible_layers(tmp_path: Path) -> None:
    total = 3 * 1024 * 1024 + 7
    image = sized_image(Layout(tmp_path), total, file_bytes=1 << 20)
    assert len(image.layers) == 5
    content = sum(node.data.__len__() for path, node in image.expected.items() if "/blob" in path)
    assert content == total
    assert sum(layer.size for layer in image.layers) > total  # random bytes do not shrink
    for layer in image.layers:
        path = tmp_path / "blobs" / "sha256" / layer.digest.removeprefix("sha256:")
        assert sha256(path.read_bytes()) == layer.digest
    assert len({layer.digest for layer in image.layers}) == 5  # nothing shared to skew a run
    assert "data0/removed-later" not in image.expected  # the last layer whites it out
    assert not [p for p in os.listdir(tmp_path / "blobs" / "sha256") if p.startswith(".")]


def test_benchmark_loads_the_modules_by_path_without_pytest(tmp_path: Path) -> None:
    """benchmarks/ load the package by its path (the repository off sys.path, as
    tests/pg.py is loaded): no pytest, no `tests` package, and a registry and image work."""
    here = Path(__file__).resolve().parent
    script = f"""
import importlib, importlib.util, sys
from pathlib import Path
DIR = Path({str(here)!r})
spec = importlib.util.spec_from_file_location(
    "bench_registry", DIR / "__init__.py", submodule_search_locations=[str(DIR)]
)
package = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = package
spec.loader.exec_module(package)
server = importlib.import_module("bench_registry.server")
layouts = importlib.import_module("bench_registry.layouts")
image = layouts.sized_image(layouts.Layout(Path({str(tmp_path)!r})), 1 << 20, text_share=0.5)
print(len(image.layers), "pytest" in sys.modules, "tests" in sys.modules)
"""
    done = subprocess.run(
        [sys.executable, "-I", "-c", script], cwd=tmp_path, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["5", "False", "False"]
