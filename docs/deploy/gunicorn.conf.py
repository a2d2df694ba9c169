"""gunicorn settings for the Private Cohort Explorer behind nginx on the same machine.

    gunicorn -c /etc/cohort/gunicorn.conf.py app:server

Workers share the ledger, the sessions and the login throttle through DATABASE_URL.
Threaded workers (gthread), as the README documents: a cached answer is served by a free
thread while other threads compute uncached views, instead of queueing behind them in a
sync worker. bench/bench_serving.py measures this file under load (bench/RESULTS.md).
"""

bind = "127.0.0.1:8050"          # loopback only: nginx is the one door from the network
workers = 4
worker_class = "gthread"
threads = 4
timeout = 120                     # a large owner upload is parsed within one request
graceful_timeout = 30
forwarded_allow_ips = "127.0.0.1"  # only nginx's forwarded headers are believed
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190
accesslog = "-"
errorlog = "-"

