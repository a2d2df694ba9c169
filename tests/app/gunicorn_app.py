"""Run the real app under gunicorn on a free loopback port, for HTTP tests and bench/.

Every request is its own connection; the access log names the worker (``%(p)s``) that
answered each one, found by a unique ``probe`` parameter. Which worker of one master accepts
a connection is up to the kernel (one worker may take them all), so tests of state shared by
workers run two masters on one data directory and address each by its port.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path

from layouts import ids
from tests.app.dash_http import callback_payload, find_hidden_input

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or \
    shutil.which("gunicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    pid: int | None = None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


@dataclass
class Client:
    """One browser: its own cookie jar."""

    server: GunicornApp
    cookies: dict[str, str] = field(default_factory=dict)

    def on(self, other: GunicornApp) -> Client:
        """The same browser (the same cookie jar) talking to another server."""
        return Client(other, self.cookies)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        probe = uuid.uuid4().hex
        sep = "&" if "?" in path else "?"
        hdrs = {"Connection": "close", **(headers or {})}
        if self.cookies:
            hdrs["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        try:
            conn.request(method, f"{path}{sep}probe={probe}", body=body, headers=hdrs)
            res = conn.getresponse()
            reply = Reply(res.status, {k.lower(): v for k, v in res.getheaders()}, res.read())
            for raw in res.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(raw).items():
                    if morsel.value and morsel["expires"] != "Thu, 01 Jan 1970 00:00:00 GMT":
                        self.cookies[name] = morsel.value
                    else:
                        self.cookies.pop(name, None)
        finally:
            conn.close()
        reply.pid = self.server.worker_of(probe)
        return reply

    def post_json(self, body: dict) -> Reply:
        return self.request("POST", "/_dash-update-component", json.dumps(body).encode(),
                            {"Content-Type": "application/json"})

    def logout(self) -> Reply:
        """Sign out as the page does: the session badge's form token, then POST /logout."""
        deps = json.loads(self.request("GET", "/_dash-dependencies").body)
        body = callback_payload(deps, ids.SESSION_BADGE, {(ids.URL, "pathname"): "/"},
                                (ids.URL, "pathname"))
        badge = json.loads(self.post_json(body).body)["response"][ids.SESSION_BADGE]
        token = find_hidden_input(badge["children"], "csrf")
        return self.request("POST", "/logout", f"csrf={token}".encode(),
                            {"Content-Type": "application/x-www-form-urlencoded"})

    def login(self, user: str, password: str) -> Reply:
        page = self.request("GET", "/login")
        token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        form = f"username={user}&password={password.replace(' ', '+')}&csrf={token}&next=/"
        return self.request("POST", "/login", form.encode(),
                            {"Content-Type": "application/x-www-form-urlencoded"})


class GunicornApp:
    """``gunicorn -w N app:server`` with ``env``; stopped by ``stop()`` (process group)."""

    def __init__(self, env: dict[str, str], log_dir: Path, workers: int = 2) -> None:
        self.env, self.log_dir, self.n_workers = env, log_dir, workers
        log_dir.mkdir(parents=True, exist_ok=True)
        self.access = log_dir / "access.log"
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT), **self.env}
        with (self.log_dir / "gunicorn.log").open("a") as log:
            self.proc = subprocess.Popen(
                [GUNICORN, "-w", str(self.n_workers), "-b", f"127.0.0.1:{self.port}",
                 "--timeout", "300", "--graceful-timeout", "10", "--log-level", "warning",
                 "--access-logfile", str(self.access),
                 "--access-logformat", "%(p)s %(r)s %(s)s", "app:server"],
                cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
        for _ in range(900):  # readiness: a bounded number of polls, not a timing assertion
            if self.proc.poll() is not None:
                raise AssertionError(f"gunicorn exited: {self.log_tail()}")
            try:
                if len(self.workers()) == self.n_workers:
                    Client(self).request("GET", "/login")
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"gunicorn never answered: {self.log_tail()}")

    def log_tail(self) -> str:
        return (self.log_dir / "gunicorn.log").read_text()[-3000:]

    def workers(self) -> list[int]:
        import psutil

        return [c.pid for c in psutil.Process(self.proc.pid).children()]

    def worker_of(self, probe: str) -> int | None:
        """The pid that logged the request carrying ``probe`` (the log line follows the reply)."""
        for _ in range(200):
            if self.access.exists():
                for line in self.access.read_text().splitlines():
                    if probe in line:
                        return int(line.split(" ", 1)[0].strip("<>"))
            time.sleep(0.02)
        return None

    def stop(self) -> None:
        stop_gunicorn(self.proc)


def stop_gunicorn(proc: subprocess.Popen | None) -> None:
    """SIGTERM the master (it stops its workers); SIGKILL its process group after 60 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
        proc.wait()


def post_huge(port: int, path: str, size: int, cookie: str = "") -> tuple[int, int]:
    """POST a body of ``size`` bytes that is generated while sent, never held in memory.

    Stops sending as soon as the server answers (or closes). Returns (status, bytes sent).
    """
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {size}\r\n"
            + (f"Cookie: {cookie}\r\n" if cookie else "") + "\r\n").encode()
    chunk = b"{" * 65536
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(head)
        while sent < size:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sent += sock.send(chunk[: size - sent])
            except OSError:
                break
        data = b""
        try:
            while b"\r\n" not in data:
                part = sock.recv(65536)
                if not part:
                    break
                data += part
        except OSError:
            pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, sent
