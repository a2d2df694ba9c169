"""Wiring: build the app's services (registry, ledger, identity, releases) from a config."""

from __future__ import annotations

from dataclasses import dataclass

from services.config import AppConfig
from services.data.registry import DatasetRegistry
from services.data.sources.options import large_dataset_options
from services.identity.session import Identity, current_identity
from services.ledger.policy import BudgetPolicy
from services.ledger.store import Ledger
from services.views.releases import ReleaseService, new_rng_factory


class IdentityService:
    """What callbacks hold as ``services.identity``: who is asking, from the server session."""

    def current(self) -> Identity:
        return current_identity()


@dataclass
class Services:
    config: AppConfig
    registry: DatasetRegistry
    ledger: Ledger
    releases: ReleaseService
    identity: IdentityService


def build_services(config: AppConfig, *, seed: int | None = None) -> Services:
    """The services of one app. ``seed`` makes noise reproducible (tests only)."""
    config.data_dir.mkdir(parents=True, exist_ok=True)
    registry = DatasetRegistry(config.data_dir / "datasets",
                               max_upload_bytes=config.max_upload_bytes,
                               extra_paths=config.dataset_paths,
                               **large_dataset_options(config))
    policy = BudgetPolicy.from_mapping({**dict(config.budgets),
                                        **({"renewal_days": config.renewal_days}
                                           if config.renewal_days else {})})
    ledger = Ledger(config.ledger_url, policy)
    releases = ReleaseService(registry, ledger, rng_factory=new_rng_factory(seed))
    return Services(config, registry, ledger, releases, IdentityService())
