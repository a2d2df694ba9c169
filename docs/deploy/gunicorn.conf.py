"""gunicorn settings for the Private Cohort Explorer behind nginx on the same machine.

    gunicorn -c /etc/cohort/gunicorn.conf.py app:server

Before any worker starts, the master checks every setting, the users file, the data directory
and the ledger database once (``on_starting``): a wrong one stops the server with one log line
naming the variable and the fix (exit status 78), not a traceback from every worker. Log lines
carry time, level and logger (``COHORT_LOG_FORMAT=json`` for JSON); sign-ins and sign-outs are
logged at INFO. ``kill -HUP`` (systemctl reload) replaces the workers gracefully.

Workers share the ledger, the sessions and the login throttle through DATABASE_URL.
Threaded workers (gthread), as the README documents: a cached answer is served by a free
thread while other threads compute uncached views, instead of queueing behind them in a
sync worker. With COHORT_RUNNER_PROCESSES=1 (cohort.env) a thread with heavy work only
waits for its worker's runner child (services/runner/), so threads are cheap and many: with 4
per worker, a worker's threads were all waiting on its child at times and a cached answer
queued behind them for seconds (p99 4 s); with 16, p99 44 ms. bench/bench_serving.py measures
this file under load (bench/RESULTS.md).
"""

from services.ops import logs as _logs
from services.ops import preflight as _preflight

bind = "127.0.0.1:8050"          # loopback only: nginx is the one door from the network
workers = 4
worker_class = "gthread"
threads = 16                      # mostly waiting on the runner child (see above)
timeout = 120                     # a large owner upload is parsed within one request
graceful_timeout = 30
forwarded_allow_ips = "127.0.0.1"  # only nginx's forwarded headers are believed
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = "-"
errorlog = "-"
logconfig_dict = _logs.logging_dict()  # time, level, logger on every line, INFO kept
control_socket_disable = True     # gunicorn >= 24 would open one under $HOME: not used here


def on_starting(server):
    """Check the configuration in the master, once, before forking workers."""
    _preflight.check_or_exit()
