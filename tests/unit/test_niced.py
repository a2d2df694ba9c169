"""Uncached work runs in a lower-priority thread and behaves as if it ran inline."""

from __future__ import annotations

import os
import threading

import pytest

from services.views import niced as niced_mod
from services.views.niced import NICE, niced


def _nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no per-thread priorities here")
def test_the_work_runs_in_another_thread_at_a_lower_priority():
    caller = threading.get_native_id()
    base = _nice_of_this_thread()
    seen = niced(lambda: (threading.get_native_id(), _nice_of_this_thread()))
    assert seen[0] != caller
    assert seen[1] == min(base + NICE, 19)
    assert _nice_of_this_thread() == base          # the request thread keeps its priority


def test_results_errors_and_nesting_are_as_inline():
    assert niced(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(ZeroDivisionError):
        niced(lambda: 1 / 0)
    outer = niced(lambda: (threading.get_native_id(), niced(threading.get_native_id)))
    assert outer[0] == outer[1]                    # nested calls run in the same thread


def test_it_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("COHORT_NICE_UNCACHED", "0")
    assert niced(threading.get_native_id) == threading.get_native_id()
    assert niced_mod._enabled() is False
