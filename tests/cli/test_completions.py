"""Completion scripts: generated from the app, committed, and never stale."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cli.completion import GENERATORS, SHELLS
from tests.conftest import REPO

COMPLETIONS = REPO / "completions"


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_committed_script_matches_the_app(shell: str) -> None:
    committed = (COMPLETIONS / SHELLS[shell]).read_text()
    assert committed == GENERATORS[shell](), (
        f"completions/{SHELLS[shell]} is stale: run `python -m cli.completion` and commit"
    )


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_script_is_valid_shell_syntax(shell: str) -> None:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")
    done = subprocess.run(
        [exe, "-n", str(COMPLETIONS / SHELLS[shell])], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def _bash_complete(words: list[str]) -> list[str]:
    script = COMPLETIONS / SHELLS["bash"]
    words_literal = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({words_literal}); COMP_CWORD={len(words) - 1}\n"
        "_shoal\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_bash_completes_subcommands_options_and_values() -> None:
    assert set(_bash_complete(["shoal", "re"])) == {"regions", "resources"}
    assert "resources" in _bash_complete(["shoal", "res"])
    assert "--dry-run" in _bash_complete(["shoal", "alloc", "--dr"])
    assert _bash_complete(["shoal", "--home", "/tmp/x", "types", "--so"]) == ["--sort"]
    assert _bash_complete(["shoal", "alloc", "--driver", "pro"]) == ["process"]
    assert _bash_complete(["shoal", "alloc", "--driver", "pod"]) == ["podman"]
    assert _bash_complete(["shoal", "pricing", "--provider", ""]) == [
        "aws",
        "azure",
        "gcp",
        "kubernetes",
        "local",
    ]
    assert _bash_complete(["shoal", "image", ""]) == ["list", "pull", "rm", "--help", "-h"]
    assert "--sum" in _bash_complete(["shoal", "image", "pull", "--s"])
    assert _bash_complete(["shoal", "catalog", "export", "--prov"]) == ["--provider"]


def test_fish_completes_subcommands_options_and_values() -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed (.ci/run installs it)")
    script = COMPLETIONS / SHELLS["fish"]

    def complete(line: str) -> list[str]:
        program = f"source {script}; complete -C {line!r}"
        done = subprocess.run(["fish", "-c", program], capture_output=True, text=True, check=True)
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert complete("shoal res") == ["resources"]
    assert set(complete("shoal alloc --dr")) == {"--driver", "--dry-run"}
    assert complete("shoal pricing --provider ") == ["aws", "azure", "gcp", "kubernetes", "local"]
    assert complete("shoal image ") == ["list", "pull", "rm"]
    assert "--sum" in complete("shoal image pull --s")
