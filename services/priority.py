"""Thread priority for heavy work, and the priority ceiling of the ledger's write lock.

A runner child lowers its priority (``lower``) so the web workers' cached answers come
first. But a child also writes to the ledger, and SQLite has one write lock that every
worker's delivery log waits for: a low-priority thread holding it gets a small share of a
busy CPU, and every waiting writer waits that much longer (priority inversion). So a thread
holding the ledger's write lock runs at the priority it had before ``lower`` (``ceiling``),
the classic priority-ceiling rule. Raising a priority back needs the right to (root, or
``LimitNICE`` in the systemd unit); without it the thread stays low and nothing fails.
Linux nice values are per thread: only the thread in the ``with`` block is raised.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

BASE: int | None = None
"""The nice value before ``lower`` (None: this process never lowered its priority)."""


def lower(by: int) -> None:
    """Lower the calling thread's priority by ``by`` (the threads it starts inherit it),
    remembering the priority to hold the ledger's write lock at."""
    global BASE
    with contextlib.suppress(OSError):
        BASE = os.getpriority(os.PRIO_PROCESS, 0)
        os.nice(by)


@contextlib.contextmanager
def ceiling() -> Iterator[None]:
    """Run the block at ``BASE`` priority if the thread was lowered (and may go back)."""
    raised = None
    if BASE is not None:
        with contextlib.suppress(OSError):
            now = os.getpriority(os.PRIO_PROCESS, 0)
            if now > BASE:
                os.setpriority(os.PRIO_PROCESS, 0, BASE)
                raised = now
    try:
        yield
    finally:
        if raised is not None:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, 0, raised)
