"""Run the committed completion scripts in real bash, zsh and fish: what a TAB offers.

The scripts find the value helper through the `shoal` on PATH (its #! line names the
interpreter), so `fake_shoal` puts one there whose interpreter is this one; PYTHONPATH
points that interpreter at this source tree, as the tests' own `shoal` processes do.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

COMPLETIONS = REPO / "completions"
TIMEOUT = 60

# zsh: a pty runs an interactive zsh that completes the line; `compadd` is wrapped to print
# each match with its description between two NUL lines, then the shell exits.
_ZSH_INIT = r"""
PROMPT=
autoload -U compinit && compinit -u -D
bindkey '^I' complete-word
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
null-line() { echo -E - $'\0' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
compadd() {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
    typeset -a __hits __dscr __tmp
    if (( $@[(I)-d] )); then
        __tmp=${@[$[${@[(i)-d]}+1]]}
        if [[ $__tmp == \(* ]]; then eval "__dscr=$__tmp"; else __dscr=( "${(@P)__tmp}" ); fi
    fi
    builtin compadd -A __hits -D __dscr "$@"
    [[ -n $__hits ]] || return
    local i
    for i in {1..$#__hits}; do
        echo -E - "MATCH:$__hits[$i]${__dscr[$i]:+ -- $__dscr[$i]}"
    done
}
"""
_ZSH_CAPTURE = r"""
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
zpty -w z "fpath=(${(q)1} \$fpath)"
zpty -w z "source ${(q)2}"
zpty -w z "$3"$'\t'
integer tog=0
local line
while zpty -r z line; do
    if [[ $line == *$'\0'* ]]; then
        (( tog++ )) && break || continue
    fi
    (( tog )) && print -r -- "${line%$'\r'}"
done
zpty -d z
"""


def fake_shoal(directory: Path, interpreter: str = sys.executable) -> Path:
    """A `shoal` script like the one pip writes: `#!INTERPRETER`, then the entry point."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "shoal"
    script.write_text(f"#!{interpreter}\nfrom cli.main import main\nmain()\n")
    script.chmod(0o755)
    return script


def shell_env(home: Path, bin_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update(
        {
            "SHOAL_HOME": str(home),
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    env.update(extra or {})
    return env


def bash_complete(line: str, env: dict[str, str]) -> list[str]:
    """COMPREPLY for `line` (a trailing space completes a new, empty word)."""
    words = line.split()
    if line.endswith(" "):
        words.append("")
    program = (
        f"source {shlex.quote(str(COMPLETIONS / 'shoal.bash'))}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={shlex.quote(line)}; COMP_POINT=${{#COMP_LINE}}\n"
        "_shoal\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, env=env, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def zsh_complete(line: str, env: dict[str, str], tmp: Path) -> dict[str, str]:
    """What zsh offers for `line`: match -> its description line ("" when none)."""
    init = tmp / "zsh-init.zsh"
    init.write_text(_ZSH_INIT)
    done = subprocess.run(
        ["zsh", "-f", "-c", _ZSH_CAPTURE, "zsh", str(COMPLETIONS), str(init), line],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    offered = {}
    for row in done.stdout.splitlines():
        if row.startswith("MATCH:"):
            match, _, description = row[len("MATCH:") :].partition(" -- ")
            offered[match] = description
    return offered


def fish_complete(line: str, env: dict[str, str]) -> dict[str, str]:
    """What fish offers for `line`: candidate -> description."""
    program = "source $argv[1]; complete -C $argv[2]"
    done = subprocess.run(
        ["fish", "-c", program, str(COMPLETIONS / "shoal.fish"), line],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return dict(
        (row.partition("\t")[0], row.partition("\t")[2]) for row in done.stdout.splitlines()
    )
