"""Uncached Explore work in a separate, lower-priority process (optional, issue 14).

A web worker serves cached answers (a ledger read) and computes uncached ones (per-group
planning, which simulates quantile releases; simulated previews; aggregates and noise):
CPU-bound Python that, in the same process, holds the GIL the cached readers need. With
``COHORT_OFFLOAD_UNCACHED=1`` each web worker hands that work to one child process of its own
(spawned on first use, ``nice`` +10), built from the same configuration, so it shares the
ledger's database and the datasets: a release goes through the same door and is recorded
once. Two calls: ``answer`` (one release, ``ReleaseService.answer``) and ``call`` (any
picklable function of the child's services and the requester, e.g. a whole Explore screen:
previews, pricing and fresh releases). The web thread only waits. A child whose dataset
version differs from the worker's (an edit since it started) refuses, and the worker answers
inline; DP refusals (budget, cap) come back as they are.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import astuple, replace
from typing import Any, TypeVar

from services.identity.roles import Role
from services.identity.session import Identity
from services.views.queries import ViewRequest

log = logging.getLogger(__name__)
T = TypeVar("T")
NICE = 10
_child: Any = None        # the child's own services (set by ``_start``)


class StaleDataset(RuntimeError):
    """The child holds another version of the dataset than the web worker."""


class _NoSession:
    """The child's identity source: it has no session; every call carries the identity the
    web worker read from its own (``_call``)."""

    def current(self) -> Identity:
        raise RuntimeError("The offload child has no session: each call names its identity.")


def _start(config: Any) -> None:
    """Child process start: lower its priority (the whole process, so ``niced`` need not
    start a lower-priority thread per draw here), build its own services."""
    global _child
    os.nice(NICE)
    os.environ["COHORT_NICE_UNCACHED"] = "0"
    from services.container import build_services

    _child = build_services(replace(config, offload_uncached=False),    # no grandchildren
                            identity=_NoSession())


def _answer(services: Any, identity: Identity, fields: tuple,
            price: bool = False) -> dict[str, Any]:
    """One release by the child's door, as a dict of ``ViewAnswer``."""
    req = ViewRequest(*fields[:5], Role(fields[5]), tuple(fields[6]))
    return services.releases.answer(identity, req, price=price).to_dict()


def _call(fn: Callable[..., T], user: str, role: str, dataset_id: str, version: str,
          args: tuple) -> T:
    ds = _child.registry.get(dataset_id, owner=True)
    if str(ds.version) != version:
        raise StaleDataset(f"{dataset_id}: {ds.version} != {version}")
    return fn(_child, Identity(user, Role(role), True), *args)


class Offload:
    """One child process per web worker, started on first use."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_start, initargs=(self.config,))
            return self._pool

    def answer(self, identity: Identity, req: ViewRequest, version: str,
               price: bool = False) -> dict[str, Any]:
        """The answer as the child's door served it (a dict of ``ViewAnswer``)."""
        fields = (*astuple(req)[:5], req.role.value, list(req.without))
        return self.call(_answer, identity, req.dataset_id, version, fields, price)

    def call(self, fn: Callable[..., T], identity: Identity, dataset_id: str, version: str,
             *args: Any) -> T:
        """``fn(services, identity, *args)`` run by the child (``fn`` and ``args`` picklable:
        a module-level function and plain values); the dataset must be at ``version``.

        A child that died (killed, out of memory) breaks its pool: the error goes to the
        caller, who answers inline, and the next call starts a new child."""
        pool = self._executor()
        try:
            return pool.submit(_call, fn, identity.user, identity.role.value, dataset_id,
                               version, args).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise

    def warm(self) -> None:
        """Start the child now and let it warm its engine (``ops.warmup``), without waiting:
        the first uncached view after boot then finds it ready instead of spawning it."""
        from services.ops.warmup import warm_engine

        self._executor().submit(warm_engine)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
