"""Console entry point.

Ctrl-C is the app's to answer (`shoal: error: interrupted`, exit 130) from the first line
here: the app's own handlers (cli/app.py) are only in place once its ~60 ms of imports are
done, and a Ctrl-C before that was a Python traceback. Once the outcome is decided (the
command returned, failed or was interrupted), Ctrl-C changes nothing: see `_settle`.
"""

# No imports here: this module is imported before any Ctrl-C handling is in place, so it
# must be imported at once (not even __future__).

INTERRUPTED = 130  # cli.exit_codes.ExitCode.INTERRUPTED, which may not be importable yet


def main() -> None:
    import sys

    sys.unraisablehook = _unraisable
    outcome: SystemExit | None = None
    settled = False
    # The outcome is decided in `_outcome`; settling is retried here, where a Ctrl-C that
    # lands on the way into `_settle` (Python checks for signals as a function starts) is
    # caught, instead of in an `except` block, where it escaped as a traceback and death by
    # SIGINT (seen once in ~9 CI runs after `free` printed "freed").
    while not settled:
        try:
            if outcome is None:
                outcome = _outcome()
            _settle()
            settled = True
        except KeyboardInterrupt:
            if outcome is None:  # a second Ctrl-C while the first was being answered
                outcome = SystemExit(INTERRUPTED)
                sys.stderr.write("shoal: error: interrupted\n")
    assert outcome is not None  # settled only once decided
    _leave_workers(outcome.code)
    if outcome.code is not None and outcome.code != 0:
        raise outcome


def run() -> None:
    """The console script (`shoal`, `python -m cli`): main(), then out without the
    interpreter's teardown.

    Teardown frees every module and object one by one: 40-60 ms of CPU in a command that
    loaded pydantic, ~20 ms in a bare `status --json`, paid after the answer is printed by
    every step of an alloc -> status -> free cycle (issue 29). What must happen at exit
    happens here instead: the atexit functions (the ledger closes its SQLite connection,
    which checkpoints its WAL; temporary directories' finalizers; a progress bar's stop),
    then stdout and stderr are flushed. Files are closed by the code that writes them (a
    gc audit of the commands found no open file left for teardown to close). main() alone,
    as the tests' probes call it, returns and leaves teardown to Python, as does an
    interrupted command."""
    code: object = 0
    try:
        main()
    except SystemExit as done:
        code = done.code
        if code == INTERRUPTED:
            # An interrupted command keeps the interpreter's whole exit: its cleanup matters
            # more than its speed, and a signal may have cut short code whose undo a
            # finalizer (a generator's `finally`, a session closed) completes. A claim once
            # left its booking ALLOCATING after SIGHUP on a team ledger: that window (the
            # signal between the claim's commit and its undo's reach) is now closed in
            # drivers.service.queue itself, and this stays a second line.
            raise
    _exit_now(code)


def _exit_now(code: object) -> None:
    import atexit
    import os

    try:  # noqa: SIM105 (no contextlib here: see the module's note)
        atexit._run_exitfuncs()
    except KeyboardInterrupt:  # a Ctrl-C now changes nothing: the outcome is decided
        pass
    _flush()
    os._exit(_status(code))


def _flush() -> None:
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone (| head), or a closed stream
            continue


def _status(code: object) -> int:
    """The exit status Python gives a SystemExit of `code`."""
    import sys

    if code is None:
        return 0
    if isinstance(code, int):
        return code
    # SystemExit("message"): Python prints it and exits 1.
    try:
        sys.stderr.write(f"{code}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return 1


def _outcome() -> SystemExit:
    """The command's exit, Ctrl-C answered; any other error is a bug and raised as it is."""
    import sys

    try:
        from cli.app import build_app

        build_app(sys.argv[1:])(prog_name="shoal")
    except SystemExit as done:
        return done
    except BaseException as exc:
        decided = _decided(exc)
        if decided is not None:  # a Ctrl-C that came as the command was exiting
            return decided
        if not _interrupted(exc):
            raise
        sys.stderr.write("shoal: error: interrupted\n")
        return SystemExit(INTERRUPTED)
    return SystemExit(0)


def _leave_workers(code: object) -> None:
    """Exit at once, without the interpreter's teardown, when a worker thread is still at
    work: a request left behind by Ctrl-C (aws: RunInstances on its thread, its outcome
    settled by the launch-in-doubt recovery). Teardown would end that thread mid-call, which
    on some stacks aborts the process (glibc's "FATAL: exception not rethrown", exit -6)
    instead of the exit the command chose. The outcome is printed and decided: flush, go."""
    import sys

    # A worker needs `threading`: a command that never imported it (most) pays no import here.
    threading = sys.modules.get("threading")
    if threading is None or threading.active_count() <= 1:
        return
    import os

    _flush()
    os._exit(_status(code))


def _unraisable(unraisable: object) -> None:
    """A Ctrl-C that lands in a callback Python cannot raise from (importlib's module-lock
    weakref callback, during the imports at start) is printed by Python as "Exception
    ignored in ..." with a traceback, and the command goes on. The command's own outcome
    answers for it (done, or interrupted at the next instant); the traceback is noise. Any
    other unraisable error is Python's to print, as before."""
    import sys

    if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)  # type: ignore[arg-type]


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and what it was raised from or while handling, without cycles."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not other for other in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _interrupted(exc: BaseException) -> bool:
    """Ctrl-C, also as Python wraps it: a KeyboardInterrupt raised while a class was being
    built during an import surfaces as the RuntimeError whose cause it is."""
    return any(isinstance(one, KeyboardInterrupt) for one in _chain(exc))


def _decided(exc: BaseException) -> SystemExit | None:
    """The exit a Ctrl-C interrupted on its way out (raised in a `finally` it passed
    through): the command's outcome stands, and was printed already."""
    if not isinstance(exc, KeyboardInterrupt):
        return None
    return next((one for one in _chain(exc) if isinstance(one, SystemExit)), None)


def _settle() -> None:
    """Ctrl-C is ignored from here to the process's end, so the exit is the outcome's.

    Two ways a Ctrl-C after the outcome killed shoal by SIGINT (a parent saw -2, whatever
    was printed): Python restores SIGINT's default action before it tears its modules
    down (tens of ms after `free` printed "freed"), and it leaves an ignored one alone; and
    under `python -m`, a KeyboardInterrupt that once passed through code run by exec() of a
    string (a dataclass being built) sets the interpreter's "unhandled KeyboardInterrupt"
    flag, which makes it kill itself by SIGINT at exit even though shoal handled it. Any
    exec() of a string that completes clears that flag again.
    """
    import signal

    while True:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            break
        except KeyboardInterrupt:  # one that came just now: the outcome is decided already
            continue
        except ValueError:  # not the main thread: an embedding caller's signals, not ours
            return
    exec("")  # clears the flag above; runs nothing


if __name__ == "__main__":
    main()
