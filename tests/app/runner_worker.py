"""A web worker for ``test_runner_kills``: starts a synthetic copy on a runner child that
stops at its model fit, prints the job's token and the child's pid, then waits to be killed.

    python -m tests.app.runner_worker DATA_DIR
"""

from __future__ import annotations

import json
import sys
import time

from app import create_app, services_of
from services.container import runner_services
from services.identity.roles import Role
from services.identity.session import Identity
from services.runner import Jobs, ProcessRunner, jobs
from tests.app import runner_hooks


def main(data_dir: str) -> None:
    jobs.HEARTBEAT = 0.2
    s = services_of(create_app({"data_dir": data_dir, "runner_processes": 1}))
    s.runner = ProcessRunner(s.config, 1, runner_services,
                             initializer=runner_hooks.mid_synthetic_fit)
    s.studio.jobs = Jobs(s.runner)
    token = s.studio.start_synthetic(Identity("olga", Role.OWNER, True), "pirads", 1.0)
    started = runner_hooks.started_file(s.config.data_dir)
    while not started.exists() or not started.read_text().strip():
        time.sleep(0.05)
    print(json.dumps({"token": token, "child": int(started.read_text())}), flush=True)
    time.sleep(runner_hooks.FOREVER)


if __name__ == "__main__":
    main(sys.argv[1])
