"""Wiring: the typed ``Services`` seam callbacks receive, built from the app's services.

Callbacks and layouts use ``Services`` fields only (what they may ask), so a page can be
tested with a stand-in holding just what it uses, and a service can change behind it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from services.config import AppConfig
from services.data.registry import DatasetRegistry
from services.data.sources.options import large_dataset_options
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger
from services.publish.service import PublishService
from services.publish.store import PublishStore
from services.runner import InlineRunner, Jobs, Lanes, ProcessRunner, Runner
from services.studio.service import StudioService
from services.views.releases import ReleaseService, new_rng_factory


class IdentitySource(Protocol):
    """Who is asking, from the server session (never from a request's input)."""

    def current(self) -> Identity: ...


@dataclass
class Services:
    """What a page's callbacks may use: datasets, the ledger, Explore answers, identity."""

    config: AppConfig
    registry: DatasetRegistry
    ledger: Ledger
    releases: ReleaseService
    identity: IdentitySource
    publish: PublishService
    studio: StudioService
    runner: Runner


def budget_policy(config: AppConfig) -> BudgetPolicy:
    """The ledger's policy from ``COHORT_BUDGETS`` (role limits, ``per_user``,
    ``dataset_cap``) and ``COHORT_BUDGET_RENEWAL_DAYS``."""
    renewal = {"renewal_days": config.renewal_days} if config.renewal_days else {}
    return BudgetPolicy.from_mapping({**dict(config.budgets), **renewal})


class _NoSession:
    """A runner child's identity source: it has no session; every piece of work carries the
    identity the web worker read from its own."""

    def current(self) -> Identity:
        raise RuntimeError("A runner child has no session: each piece of work names its "
                           "identity.")


def runner_services(config: AppConfig) -> Services:
    """A runner child's services: the same configuration, no session (module-level, so a
    spawned child can build them)."""
    return build_services(config, identity=_NoSession())


def make_runner(config: AppConfig) -> Runner:
    """Where heavy work runs: inline (``COHORT_RUNNER_PROCESSES`` 0), else that many
    lower-priority child processes per web worker, each with services built like these, and
    one more for previews and quotes (``Lanes``)."""
    if config.runner_processes > 0:
        return Lanes(ProcessRunner(config, config.runner_processes, runner_services),
                     ProcessRunner(config, 1, runner_services))
    return InlineRunner()


def build_services(config: AppConfig, *, identity: IdentitySource,
                   user_role: Callable[[str], Role | None] = lambda _name: None,
                   seed: int | None = None) -> Services:
    """The services of one app. ``identity``: who is asking (the web layer reads it from the
    server session); ``user_role``: a configured user's role (a page's named audience);
    ``seed`` makes noise reproducible (tests only)."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    registry = DatasetRegistry(config.data_dir / "datasets",
                               max_upload_bytes=config.max_upload_bytes,
                               extra_paths=config.dataset_paths,
                               **large_dataset_options(config))
    ledger = Ledger(config.ledger_url, budget_policy(config))
    releases = ReleaseService(registry, ledger, rng_factory=new_rng_factory(seed))
    runner = make_runner(config)
    registry.on_confirm.append(releases.calibrate)    # a confirmed version's calibration
    publish = PublishService(PublishStore(ledger.db), ledger, releases, registry,
                             user_role=user_role)
    studio = StudioService(registry, ledger, rng_factory=new_rng_factory(seed),
                           runs_dir=config.data_dir / "studio-runs", jobs=Jobs(runner))
    services = Services(config, registry, ledger, releases, identity, publish, studio, runner)
    runner.bind(services)
    return services
