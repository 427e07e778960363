"""The bash completion script, written from the command model."""

from __future__ import annotations

from cli.completion.model import HEADER, Cmd, Opt, command_tree, every, quote, quote_words

_BASH_VALUES = r"""_shoal_python() {
    # The interpreter that runs the shoal script $1, into `py`: its #! line, or the exec line
    # pip writes when that path is too long for #! or has spaces. Fails for anything else
    # (a version manager's shim, a binary).
    local line="" exec_line=""
    { IFS= read -r line; IFS= read -r exec_line; } < "$1" 2>/dev/null
    if [[ $line == '#!/bin/sh' && $exec_line == "'''exec' "* ]]; then
        exec_line=${exec_line#"'''exec' "}
        exec_line=${exec_line%' "$0" "$@"'}
        exec_line=${exec_line#\"}
        py=("${exec_line%\"}")
    elif [[ $line == '#!'*python* || $line == '#!'*pypy* ]]; then
        read -r -a py <<< "${line#'#!'}"
    else
        return 1
    fi
}
_shoal_values() {
    # Machine-local values from cli.complete_values, run by shoal's own interpreter; through
    # a pyenv, asdf or mise shim, by the interpreter of the script the shim runs.
    local bin="${COMP_WORDS[0]}" manager real
    local -a py=() ctx=()
    [[ $bin == */* ]] || bin=$(type -P -- "$bin") || return 0
    if ! _shoal_python "$bin"; then
        for manager in pyenv asdf mise; do
            type -P "$manager" >/dev/null || continue
            real=$("$manager" which shoal 2>/dev/null) && _shoal_python "$real" && break
        done
        ((${#py[@]})) || return 0
    fi
    [[ -n $home ]] && ctx+=(--home "$home")
    [[ -n $config ]] && ctx+=(--config "$config")
    [[ -n $out ]] && ctx+=(--out "$out")
    "${py[@]}" -P -m cli.complete_values "${ctx[@]}" "$@" 2>/dev/null
}
_shoal_reply() {
    # Lines of stdin that start with $cur: never `compgen -W`, which would expand `$(...)`
    # in a value.
    local value
    while IFS= read -r value; do
        [[ $value == "$cur"* ]] && COMPREPLY+=("$value")
    done
    return 0
}
_shoal_words() {
    local -a words
    local word
    read -r -a words <<< "$1"
    for word in "${words[@]}"; do
        [[ $word == "$cur"* ]] && COMPREPLY+=("$word")
    done
    return 0
}"""


def _bash_case(arms: list[tuple[list[str], list[str]]], indent: str) -> list[str]:
    """`case` arms, patterns quoted (a command path has a space)."""
    out = []
    for patterns, body in arms:
        head = "|".join(quote(p) if " " in p or not p else p for p in patterns)
        out.append(f"{indent}{head}) {'; '.join(body)} ;;")
    return out


def _bash_values(opt: Opt) -> list[str]:
    body = [f"_shoal_words {quote_words(opt.choices)}"] if opt.choices else []
    if opt.dynamic:
        body.append(f"_shoal_reply < <(_shoal_values {opt.dynamic})")
    return body


def script() -> str:
    globals_, commands = command_tree()
    leaves = every(commands)
    groups = [c for c in commands if c.subcommands]
    root = Cmd("", "", globals_, [], commands)

    valued = [([c.path], [f"valued={quote(' ' + ' '.join(c.valued()) + ' ')}"]) for c in leaves]
    valued.append((["*"], [f"valued={quote(' ' + ' '.join(root.valued()) + ' ')}"]))

    # An option's values, per command: `--output` is a format for most, a file for one.
    value_arms: dict[str, tuple[list[str], list[str]]] = {}
    for cmd in [root, *leaves]:
        for opt in cmd.options:
            body = _bash_values(opt)
            if body:
                key = "; ".join(body)
                patterns = value_arms.setdefault(key, ([], body))[0]
                patterns += [f"{cmd.path}:{n}" for n in opt.names]

    positional: list[tuple[list[str], list[str]]] = []
    for cmd in leaves:
        for index, arg in enumerate(cmd.args):
            if arg.dynamic:
                fill = f"_shoal_reply < <(_shoal_values {arg.dynamic})"
            elif arg.path:
                fill = "return 0"  # nothing here: `complete -o default` offers files
            else:
                continue
            test = "" if arg.many and index == len(cmd.args) - 1 else f"((npos == {index})) && "
            positional.append(([cmd.path], [f"{test}{fill}"]))
            break  # a second positional (task NAME) has nothing to offer
    positional.append(([""], [f"_shoal_words {quote_words(c.name for c in commands)}"]))
    positional += [
        ([g.path], [f"_shoal_words {quote_words(s.name for s in g.subcommands)}"]) for g in groups
    ]

    options = [([c.path], [f"_shoal_words {quote_words(c.words())}"]) for c in leaves + groups]
    options.append(([""], [f"_shoal_words {quote_words(root.words())}"]))

    group_names = "|".join(g.name for g in groups)
    lines = [
        f"# {HEADER.format(shell='bash')}",
        _BASH_VALUES,
        "_shoal_valued() {",
        '    case "$cmd" in',
        *_bash_case(valued, "        "),
        "    esac",
        "}",
        "_shoal() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" cmd="" home="" config="" out=""',
        '    local w skip="" valued="" ended="" i npos=0',
        "    COMPREPLY=()",
        "    _shoal_valued",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        w="${COMP_WORDS[i]}"',
        "        if [[ -n $skip ]]; then",
        "            [[ $w == = ]] && continue  # bash splits --home=DIR at the =",
        '            case "$skip" in',
        '                --home) home="$w" ;;',
        '                --config) config="$w" ;;',
        '                --out) out="$w" ;;',
        "            esac",
        '            skip=""',
        "            continue",
        "        fi",
        "        if [[ -z $ended && $w == -* ]]; then",
        "            [[ $w == -- ]] && ended=1",
        '            [[ $valued == *" $w "* ]] && skip="$w"',
        "            continue",
        "        fi",
        '        case "$cmd" in',
        '            "") cmd="$w" ;;',
        f'            {group_names}) cmd="$cmd $w" ;;',
        "            *) ((npos++)) ;;",
        "        esac",
        "        _shoal_valued",
        "    done",
        "    [[ $cur == = ]] && return 0  # `--driver=` then TAB: type a letter first",
        "    if [[ -n $skip ]]; then",
        '        case "$cmd:$skip" in',
        *_bash_case(list(value_arms.values()), "            "),
        "        esac",
        "        return 0",
        "    fi",
        "    if [[ $cur != -* ]]; then",
        '        case "$cmd" in',
        *_bash_case(positional, "            "),
        "        esac",
        "        ((${#COMPREPLY[@]})) && return 0",
        "    fi",
        '    case "$cmd" in',
        *_bash_case(options, "        "),
        "    esac",
        "    return 0",
        "}",
        "complete -o default -F _shoal shoal",
        "",
    ]
    return "\n".join(lines)
