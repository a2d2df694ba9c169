"""The sign-in page: plain HTML served before Dash (no scripts, so it works under the CSP)."""

from __future__ import annotations

import html

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · Private Cohort Explorer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/svg+xml" href="/favicon.svg">
<style>
body{{font-family:system-ui,sans-serif;background:#f4f6f8;display:flex;justify-content:center;
margin:0;padding-top:12vh;color:#1b1b1b}}
form{{background:#fff;padding:2rem 2.5rem;border-radius:8px;box-shadow:0 1px 4px #0002;width:20rem}}
h1{{font-size:1.2rem;margin:0 0 1rem}} label{{display:block;margin:.8rem 0 .2rem}}
input[type=text],input[type=password]{{width:100%;padding:.45rem;box-sizing:border-box;
border:1px solid #6b6b6b;border-radius:4px}}
button{{margin-top:1.2rem;width:100%;padding:.55rem;background:#1f5f8b;color:#fff;border:0;
border-radius:4px}} .err{{color:#a40000}} .note{{color:#5a3d00;background:#fff4d6;padding:.5rem}}
input:focus-visible,button:focus-visible{{outline:3px solid #0b57d0;outline-offset:2px}}
</style></head><body>
<main><form method="post" action="login">
<h1>Private Cohort Explorer</h1>{notice}{error}
<label for="username">User name</label>
<input id="username" name="username" type="text" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<input type="hidden" name="csrf" value="{csrf}"><input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form></main></body></html>
"""


def login_page(*, csrf: str, next_url: str, error: str = "", notice: str = "") -> str:
    """The sign-in form; ``error`` and ``notice`` are plain text (escaped here)."""
    return _PAGE.format(
        error=f'<p class="err" role="alert">{html.escape(error)}</p>' if error else "",
        notice=f'<p class="note">{html.escape(notice)}</p>' if notice else "",
        csrf=html.escape(csrf), next=html.escape(next_url))
