"""gunicorn settings for the Private Cohort Explorer behind nginx on the same machine.

    gunicorn -c /etc/cohort/gunicorn.conf.py app:server

Workers share the ledger, the sessions and the login throttle through DATABASE_URL.
Threaded workers (gthread) let a cached answer be served while other threads of the same
worker compute uncached views; the interpreter's switch interval is shortened so that a
cached request, which gives up the GIL at every SQL or socket call, does not wait up to
5 ms to take it back each time (bench/bench_serving.py measures both).
"""

import os
import sys

bind = "127.0.0.1:8050"          # loopback only: nginx is the one door from the network
workers = 4
worker_class = "gthread"
threads = 4
switch_interval_ms = float(os.environ.get("COHORT_SWITCH_INTERVAL_MS", "1"))
timeout = 120                     # a large owner upload is parsed within one request
graceful_timeout = 30
forwarded_allow_ips = "127.0.0.1"  # only nginx's forwarded headers are believed
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = "-"
errorlog = "-"


def post_fork(server, worker):
    """Shorter GIL hand-over in each worker (Python's default is 5 ms)."""
    sys.setswitchinterval(switch_interval_ms / 1000)
