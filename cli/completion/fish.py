"""The fish completion script, written from the command model."""

from __future__ import annotations

from cli.completion.model import HEADER, LABELS, Cmd, Opt, command_tree, every


def _fq(text: str) -> str:
    """fish's single quotes, where a backslash escapes a quote and itself."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fword(text: str) -> str:
    """A command path as one fish word: quoted only when it has a space (or is empty)."""
    return f'"{text}"' if " " in text or not text else text


_FISH_VALUES = r"""function __shoal_python --argument-names bin -d 'its interpreter'
    # Its #! line, or the exec line pip writes when that path is too long for #! or has
    # spaces; nothing for anything else (a version manager's shim, a binary).
    set -l head (head -n 2 $bin 2>/dev/null); or return 1
    if test "$head[1]" = '#!/bin/sh'; and string match -q -- "'''exec' *" "$head[2]"
        set -l exec_line (string replace -r -- '^\'\'\'exec\' (.*) "\$0" "\$@"$' '$1' $head[2])
        string trim -c '"' -- $exec_line
    else if string match -qr -- '^#!.*(python|pypy)' "$head[1]"
        string split -n ' ' -- (string sub -s 3 -- $head[1])
    else
        return 1
    end
end
function __shoal_values --description 'values only this machine knows'
    # Run by shoal's own interpreter; through a pyenv, asdf or mise shim, by the interpreter
    # of the script the shim runs.
    set -l state (__shoal_state)
    set -l bin (commandline -opc)[1]
    string match -q -- '*/*' $bin; or set bin (command -s -- $bin); or return 0
    set -l py (__shoal_python $bin)
    if test (count $py) -eq 0
        for manager in pyenv asdf mise
            command -q $manager; or continue
            set -l real ($manager which shoal 2>/dev/null); or continue
            set py (__shoal_python $real); and break
        end
    end
    test (count $py) -gt 0; or return 0
    set -l ctx
    test -n "$state[3]"; and set -a ctx --home $state[3]
    test -n "$state[4]"; and set -a ctx --config $state[4]
    test -n "$state[5]"; and set -a ctx --out $state[5]
    $py -P -m cli.complete_values $ctx $argv 2>/dev/null
end
function __shoal_is --argument-names want --description 'the line names this command'
    set -l state (__shoal_state)
    test "$state[1]" = "$want"
end
function __shoal_at --argument-names want position --description 'at this positional'
    set -l state (__shoal_state)
    test "$state[1]" = "$want"; and test "$state[2]" = "$position"
end"""


def _fish_state(commands: list[Cmd], root: Cmd) -> list[str]:
    """`__shoal_state`: the command path, how many positionals precede the cursor, and the
    --home, --config and --out values, one per line (skipping each option's value, so a
    value is never taken for a subcommand or an argument)."""
    groups = " ".join(c.name for c in commands if c.subcommands)
    lines = [
        "function __shoal_state --description 'command path, positionals, --home/--config/--out'",
        "    set -l cmd ''",
        "    set -l npos 0",
        "    set -l home ''",
        "    set -l config ''",
        "    set -l out ''",
        "    set -l skip ''",
        "    set -l ended 0",
        f"    set -l valued {' '.join(root.valued())}",
        "    for w in (commandline -opc)[2..-1]",
        '        if test -n "$skip"',
        "            switch $skip",
        "                case --home",
        "                    set home $w",
        "                case --config",
        "                    set config $w",
        "                case --out",
        "                    set out $w",
        "            end",
        "            set skip ''",
        "            continue",
        "        end",
        "        if test $ended = 0; and string match -q -- '-*' $w",
        "            if test $w = --",
        "                set ended 1",
        "            else if string match -qr -- '^--(home|config|out)=' $w",
        "                set -l pair (string split -m 1 = -- $w)",
        "                set (string sub -s 3 -- $pair[1]) $pair[2]",
        "            else if contains -- $w $valued",
        "                set skip $w",
        "            end",
        "            continue",
        "        end",
        '        if test -z "$cmd"',
        "            set cmd $w",
        f"        else if contains -- $cmd {groups}",
        '            set cmd "$cmd $w"',
        "        else",
        "            set npos (math $npos + 1)",
        "        end",
        '        switch "$cmd"',
    ]
    for cmd in every(commands):
        lines += [
            f"            case {_fword(cmd.path)}",
            f"                set valued {' '.join(cmd.valued())}",
        ]
    lines += [
        "            case '*'",
        "                set valued",
        "        end",
        "    end",
        '    printf \'%s\\n\' "$cmd" $npos "$home" "$config" "$out"',
        "end",
    ]
    return lines


def _fish_opt(opt: Opt, condition: str) -> str:
    parts = ["complete -c shoal", f"-n {_fq(condition)}"]
    for name in opt.names:
        parts.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
    if opt.takes_value:
        parts.append("-r")
        values = " ".join(opt.choices)
        if opt.dynamic:
            values = f"{values} (__shoal_values {opt.dynamic})".strip()
        if values:
            parts.append(f"-f -a {_fq(values)}")
        elif opt.path:
            parts.append("-F")
    parts.append(f"-d {_fq(opt.help)}")
    return " ".join(parts)


def _fish_args(cmd: Cmd) -> list[str]:
    out = []
    for index, arg in enumerate(cmd.args):
        many = arg.many and index == len(cmd.args) - 1
        condition = (
            f"__shoal_is {_fword(cmd.path)}" if many else f"__shoal_at {_fword(cmd.path)} {index}"
        )
        if arg.dynamic:
            what = f"-f -a {_fq(f'(__shoal_values {arg.dynamic})')}"
        elif arg.path:
            what = "-F"
        else:
            continue
        label = LABELS.get(arg.dynamic or "", arg.metavar.lower())
        out.append(f"complete -c shoal -n {_fq(condition)} {what} -d {_fq(label)}")
    return out


def script() -> str:
    globals_, commands = command_tree()
    root = Cmd("", "", globals_)
    lines = [
        f"# {HEADER.format(shell='fish')}",
        _FISH_VALUES,
        *_fish_state(commands, root),
        "complete -c shoal -f",
    ]
    top = '__shoal_is ""'
    lines += [f"complete -c shoal -n {_fq(top)} -a {c.name} -d {_fq(c.help)}" for c in commands]
    lines += [_fish_opt(o, top) for o in globals_]
    for cmd in commands:
        condition = f"__shoal_is {cmd.name}"
        lines += [_fish_opt(o, condition) for o in cmd.options]
        lines += [
            f"complete -c shoal -n {_fq(condition)} -a {sub.name} -d {_fq(sub.help)}"
            for sub in cmd.subcommands
        ]
        lines += _fish_args(cmd)
        for sub in cmd.subcommands:
            lines += [_fish_opt(o, f"__shoal_is {_fword(sub.path)}") for o in sub.options]
            lines += _fish_args(sub)
    return "\n".join(lines) + "\n"
