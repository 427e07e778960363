"""Field types the drivers' config and option models share: a command, an environment,
a failure probability. A model module: imported by the driver modules, which are imported
only when a driver is opened (and its config checked)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field

from drivers.definitions.limits import MAX_DELAY_SECONDS
from providers.core.errors import shown

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Past these the kernel refuses the exec (ENAMETOOLONG, E2BIG): said before anything is
# reserved.
_PATH_MAX = 4096
_ARG_MAX = 128 * 1024


def _argv(entry: Any) -> list[str]:
    """A command: a string of shell words, or a list of strings (the argv)."""
    if entry is None:
        return []
    if isinstance(entry, str):
        try:
            argv = shlex.split(entry)
        except ValueError as exc:
            raise ValueError(f"{exc}; quote the command properly") from None
    elif isinstance(entry, list) and all(isinstance(arg, str) for arg in entry):
        argv = list(entry)
    else:
        text = json.dumps(entry)[:60]
        raise ValueError(
            f"must be a command string or a list of strings, got {text} (-o values are JSON "
            f"when they parse: write -o 'entry=\"{text}\"' for a command of that name)"
        )
    if any("\0" in arg for arg in argv):
        raise ValueError("holds a NUL byte, which no command line can carry")
    if argv and len(argv[0].encode()) >= _PATH_MAX:
        raise ValueError(f"the command name {shown(argv[0])} is too long")
    if any(len(arg.encode()) >= _ARG_MAX for arg in argv):
        raise ValueError("an argument is longer than the kernel accepts (128 KiB)")
    return argv


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(
            f"{shown(name)} is not an environment variable name (letters, digits and _, "
            "not starting with a digit)"
        )
    return name


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("holds a NUL byte, which no environment can carry")
    return value


Command = Annotated[list[str], BeforeValidator(_argv)]
EnvName = Annotated[str, AfterValidator(_env_name)]
Env = dict[EnvName, Annotated[str, AfterValidator(_no_nul)]]
Probability = Annotated[int, Field(ge=0, le=255, description="0 never, 1-254 random, 255 always")]
Delay = Annotated[float, Field(ge=0, le=MAX_DELAY_SECONDS)]

ENTRY = "a command: a string of shell words or a list; default the image's"
ENV = "extra environment variables: NAME = string"
