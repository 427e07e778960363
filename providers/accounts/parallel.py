"""Run independent requests at once: regions of an account, and the APIs of one region.

Threads, not asyncio: the HTTP client is synchronous, and each call owns its own client
(HttpClient is not thread-safe). Results come back in the order of the calls; a call that
raised gives its exception in its place, for the caller to decide what is fatal. Daemon
threads: Ctrl-C ends the command at once (exit 130) instead of waiting for the requests
in flight, which write nothing (the cache is written by the caller, after).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
MAX_WORKERS = 32  # a request mostly waits on the network; 17 regions x 4 APIs fit


def run_all(calls: Sequence[Callable[[], T]], workers: int = MAX_WORKERS) -> list[T | Exception]:
    """Every call's result (or the Exception it raised), in order. One call runs inline."""
    if len(calls) <= 1:
        return [_run(call) for call in calls]
    missing = RuntimeError("a call gave no result")
    results: list[T | Exception] = [missing] * len(calls)
    slots = threading.BoundedSemaphore(max(1, workers))
    done = threading.Semaphore(0)

    def work(index: int) -> None:
        try:
            results[index] = _run(calls[index])
        finally:
            slots.release()
            done.release()

    for index in range(len(calls)):
        slots.acquire()
        threading.Thread(target=work, args=(index,), daemon=True, name="shoal-fetch").start()
    for _ in calls:
        done.acquire()
    return results


def _run(call: Callable[[], T]) -> T | Exception:
    try:
        return call()
    except Exception as exc:  # returned as data: the caller knows which are fatal
        return exc


def first_error(results: Sequence[object]) -> Exception | None:
    return next((r for r in results if isinstance(r, Exception)), None)
