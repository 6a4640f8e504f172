"""Blocking work of the proxy (parsing a big line, promoting a result) run on a worker
thread that keeps no part of it once done.

An idle anyio worker thread holds on to its last job (the function, its arguments and its
result) until it is given the next one or has idled for ten seconds: after a result of
200 MB, that is 200 MB kept alive while the next big result is read, and the proxy's
peak memory would count both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread

__all__ = ["run_and_release"]

_T = TypeVar("_T")


async def run_and_release(work: Callable[[], _T]) -> _T:
    """`work()` on a worker thread; neither *work* (nor what it holds) nor its result is
    referenced by the thread afterwards. The caller gives up its own reference to *work*."""
    todo = [work]
    done: list[_T] = []
    del work

    def job() -> None:
        done.append(todo.pop()())

    await anyio.to_thread.run_sync(job)
    return done.pop()
