"""The zsh completion script, written from the command model."""

from __future__ import annotations

import re

from cli.completion.model import HEADER, LABELS, Cmd, Opt, command_tree, quote

_ZSH_VALUES = r"""_shoal_python() {
    # The interpreter that runs the shoal script $1, into `py`: its #! line, or the exec line
    # pip writes when that path is too long for #! or has spaces. Fails for anything else
    # (a version manager's shim, a binary).
    local line="" exec_line=""
    { IFS= read -r line; IFS= read -r exec_line } < $1 2>/dev/null
    if [[ $line == '#!/bin/sh' && $exec_line == "'''exec' "* ]]; then
        exec_line=${exec_line#"'''exec' "}
        exec_line=${exec_line%' "$0" "$@"'}
        exec_line=${exec_line#\"}
        py=("${exec_line%\"}")
    elif [[ $line == '#!'*python* || $line == '#!'*pypy* ]]; then
        py=(${=line#'#!'})
    else
        return 1
    fi
}
_shoal_values() {
    # Machine-local values from cli.complete_values, run by shoal's own interpreter; through
    # a pyenv, asdf or mise shim, by the interpreter of the script the shim runs.
    local bin=$_shoal_bin manager real
    local -a py ctx
    [[ $bin == */* ]] || bin=${commands[$bin]}
    [[ -n $bin ]] || return 0
    if ! _shoal_python $bin; then
        for manager in pyenv asdf mise; do
            (( $+commands[$manager] )) || continue
            real=$($manager which shoal 2>/dev/null) && _shoal_python $real && break
        done
        (( $#py )) || return 0
    fi
    [[ -n $_shoal_home ]] && ctx+=(--home "$_shoal_home")
    [[ -n $_shoal_config ]] && ctx+=(--config "$_shoal_config")
    [[ -n ${opt_args[--out]} ]] && ctx+=(--out "${(Q)opt_args[--out]}")
    "${py[@]}" -P -m cli.complete_values "${ctx[@]}" "$@" 2>/dev/null
}
_shoal_ids() {
    local -a ids expl
    ids=(${(f)"$(_shoal_values ids)"})
    _wanted ids expl 'allocation id' compadd -a ids
}
_shoal_images() {
    local -a images expl
    images=(${(f)"$(_shoal_values images)"})
    _wanted images expl 'image' compadd -a images
}"""


def _zsh_desc(text: str) -> str:
    # Inside _arguments' [...] a backslash quotes the next character; colons and the rest of
    # the punctuation show as written.
    return re.sub(r"([\\\[\]])", r"\\\1", text)


def _zsh_action(opt: Opt) -> str:
    message = opt.names[0].lstrip("-")
    if opt.dynamic == "drivers":
        return ":driver:_shoal_drivers"
    if opt.choices:
        return f":{message}:({' '.join(opt.choices)})"
    if opt.path:
        return f":{message}:_files"
    return f":{message}: "


def _zsh_specs(cmd: Cmd) -> list[str]:
    specs = []
    for opt in cmd.options:
        action = _zsh_action(opt) if opt.takes_value else ""
        specs += [quote(f"{name}[{_zsh_desc(opt.help)}]{action}") for name in opt.names]
    for index, arg in enumerate(cmd.args, start=1):
        message = LABELS.get(arg.dynamic or "", arg.metavar.lower())
        if arg.dynamic:
            action = f"_shoal_{arg.dynamic}"
        elif arg.path:
            action = "_files"
        else:
            action = " "
        position = "*" if arg.many else str(index)
        specs.append(quote(f"{position}:{message}:{action}"))
    return specs


def _zsh_describe(tag: str, cmds: list[Cmd], indent: str) -> list[str]:
    items = " ".join(quote(f"{c.name}:{c.help}") for c in cmds)
    return [
        f"{indent}local -a subcommands=({items})",
        f"{indent}_describe -t commands {quote(tag)} subcommands && ret=0",
    ]


def script() -> str:
    globals_, commands = command_tree()
    from drivers.registry import builtin_kinds

    root = Cmd("", "", globals_)
    kinds = " ".join(builtin_kinds(with_aliases=True))
    lines = [
        "#compdef shoal",
        f"# {HEADER.format(shell='zsh')}",
        _ZSH_VALUES,
        "_shoal_drivers() {",
        "    local -a drivers expl",
        f'    drivers=({kinds} ${{(f)"$(_shoal_values drivers)"}})',
        "    _wanted drivers expl 'driver' compadd -a drivers",
        "}",
        "_shoal() {",
        '    local curcontext="$curcontext" state state_descr line ret=1',
        "    local -A opt_args",
        "    local _shoal_bin=$words[1]",
        "    _arguments -C \\",
        *[f"        {spec} \\" for spec in _zsh_specs(root)],
        "        '1: :->command' \\",
        "        '*:: :->args' && ret=0",
        # The global options' values, for the value helper run further in.
        "    local _shoal_home=${(Q)opt_args[--home]} _shoal_config=${(Q)opt_args[--config]}",
        "    case $state in",
        "        command)",
        *_zsh_describe("shoal command", commands, "            "),
        "            ;;",
        "        args)",
        '            curcontext="${curcontext%:*:*}:shoal-$line[1]:"',
        "            case $line[1] in",
    ]
    for cmd in commands:
        if not cmd.subcommands:
            specs = " ".join(_zsh_specs(cmd))
            lines.append(f"                {cmd.name}) _arguments {specs} && ret=0 ;;")
            continue
        specs = " ".join(_zsh_specs(cmd))
        lines += [
            f"                {cmd.name})",
            f"                    _arguments -C {specs} '1: :->sub' '*:: :->subargs' && ret=0",
            "                    case $state in",
            "                        sub)",
            *_zsh_describe(f"{cmd.name} command", cmd.subcommands, " " * 28),
            "                            ;;",
            "                        subargs)",
            '                            curcontext="${curcontext%:*:*}:shoal-'
            f'{cmd.name}-$line[1]:"',
            "                            case $line[1] in",
        ]
        for sub in cmd.subcommands:
            sub_specs = " ".join(_zsh_specs(sub))
            lines.append(f"{' ' * 32}{sub.name}) _arguments {sub_specs} && ret=0 ;;")
        lines += [
            "                            esac ;;",
            "                    esac ;;",
        ]
    lines += [
        "            esac ;;",
        "    esac",
        "    return ret",
        "}",
        '_shoal "$@"',
        "",
    ]
    return "\n".join(lines)
