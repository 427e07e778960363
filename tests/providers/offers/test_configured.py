"""The providers `shoal offers` asks without -p: local, aws and azure always, gcp with its
price list's key (or prices cached), kubernetes where kubectl would find a cluster."""

from __future__ import annotations

from pathlib import Path

from providers.offers.configured import configured_providers


def test_the_default_providers_follow_what_is_configured(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert configured_providers(home, lambda: []) == ["aws", "azure", "local"]
    assert configured_providers({**home, "SHOAL_GCP_API_KEY": "k"}, lambda: []) == [
        "aws",
        "azure",
        "gcp",
        "local",
    ]
    assert "gcp" in configured_providers(home, lambda: ["aws", "gcp"])  # cached prices
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("apiVersion: v1\n")
    assert "kubernetes" in configured_providers(home, lambda: [])
    # KUBECONFIG names the files kubectl reads (missing ones are skipped, as kubectl does).
    listed = {**home, "KUBECONFIG": str(tmp_path / "missing")}
    assert "kubernetes" not in configured_providers(listed, lambda: [])
    in_pod = {**listed, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    assert "kubernetes" in configured_providers(in_pod, lambda: [])


def test_the_cache_is_only_asked_when_gcp_has_no_key(tmp_path: Path) -> None:
    def never() -> list[str]:
        raise AssertionError("the cache was opened")

    assert "gcp" in configured_providers({"SHOAL_GCP_API_KEY": "k", "HOME": str(tmp_path)}, never)
