"""The collaboration scenario: does the privacy budget last a real collaboration? (issue 21)

Driven over HTTP with real sign-ins, as the people would, on the sample cohort with the
default settings and a PostgreSQL ledger (a fresh database, dropped afterwards):

1. the owner releases Fig. 2–5 and compare mode of Fig. 2;
2. two collaborators each release the four presets and three views of their own (different
   columns and groupings);
3. two third parties each release the four presets and one view of their own;
4. the owner publishes a four-figure page for third parties; a third party opens it;
5. then a third party presses every price, preview and release it can, on every column ×
   grouping, for 60 s.

Before every spending press the bench reads the price the screen showed (the Release or
"Price this grouping" button of the preview) and after it the ledger's charge, so "the price
before the first press is the price charged" is checked for every release. The ledger is read
directly (same database) only to measure; everything the users do goes through the app.

Targets: the dataset's loss after steps 1–4 ≤ 10 (a third of the default cap); every third
party holds all four paper figures; no mean or box of a group of ≥ 100 patients withheld
anywhere; nothing refused for budget; every charge equal to the price shown; in step 5 the
dataset's loss grows by no more than that third party was charged; the ledger's invariants
hold. ``python -m bench.bench_collaboration [--database-url URL] [--hammer 60]`` writes its
section into ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.bench_serving import HttpSession, ledger_database
from bench.common import BENCH_DIR, header_markdown, load_average
from layouts import ids
from services.identity.roles import Role
from services.identity.users import add_user
from services.ledger.audit import check_invariants
from services.ledger.store import Ledger
from services.views.queries import PRESETS, VIEWS
from tests.app.dash_http import callback_payload
from tests.app.explore_client import post as press
from tests.app.gunicorn_app import Client, GunicornApp

RESULTS = BENCH_DIR / "RESULTS.md"
DATASET = "pirads"
PASSWORD = "collaboration-bench-password"
USERS = {"olga": "owner", "carl": "collaborator", "cleo": "collaborator",
         "tina": "third_party", "theo": "third_party"}
OWN_VIEWS = {   # (view, measured column, grouping): what each analyst looks at on their own
    "carl": [("histogram", "Gleason score", None), ("mean", "Age", "Year"),
             ("median", "Number_of_Lesions", None)],
    "cleo": [("histogram", "Follow up", None), ("mean", "Age", "BPH"),
             ("variance", "Age", None)],
    "tina": [("mean", "Age", "Year")],
    "theo": [("histogram", "Therapy", None)],
}
LOSS_TARGET = 10.0
BUDGET_WORDS = ("budget exhausted", "privacy-loss cap", "its cap on the total")


@dataclass
class Step:
    """One spending press: who, what, the price the screen showed, what the ledger charged."""

    user: str
    what: str
    shown: float | None        # ε on the button before the press (None: opened free)
    charged: float
    loss_added: float
    outcome: str               # released | priced | free | refused | error


@dataclass
class Scenario:
    steps: list[Step] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _price(label: str) -> float | None:
    found = re.search(r"ε ([0-9.]+)\)", label or "")
    return float(found.group(1)) if found else None


class Person:
    """One signed-in browser and the role's figures in the ledger (read to measure only)."""

    def __init__(self, srv: GunicornApp, ledger: Ledger, name: str) -> None:
        client = Client(srv)
        reply = client.login(name, PASSWORD)
        if reply.status != 302:
            raise RuntimeError(f"sign-in of {name} failed: {reply.status}")
        self.http = HttpSession(srv.port, client.cookies)
        self.name, self.role, self.ledger = name, USERS[name], ledger
        self.client = client

    def spent(self) -> float:
        return self.ledger.status(role=Role(self.role), dataset_id=DATASET,
                                  user=self.name).user.spent

    def loss(self) -> float:
        return self.ledger.dataset_loss(DATASET)

    def values(self, view: str, x: str, group: str | None, role: str | None = None,
               compare: bool = False) -> dict:
        return {"dataset": DATASET, "role": role or self.role, "view": view, "x": x,
                "group": group or "none", "mechanism": "sound", "compare": compare}

    def release(self, run: Scenario, what: str, values: dict) -> str:
        """Preview, then press until released (pricing the grouping first when needed),
        checking each press against the price the screen showed."""
        shown = press(self.http, ids.EX_VIEW, **values)
        for _ in range(3):
            if shown.status != 200:
                run.steps.append(Step(self.name, what, None, 0.0, 0.0, "error"))
                return "error"
            label = shown.release_label
            free = label.startswith("Released")
            price = None if free else _price(label)
            before, loss = self.spent(), self.loss()
            reply = press(self.http, ids.EX_RELEASE, **values)
            charged, added = self.spent() - before, self.loss() - loss
            text = reply.text
            if any(w in text for w in BUDGET_WORDS):
                run.refusals.append(f"{self.name}: {what}: {reply.message[:160]}")
                run.steps.append(Step(self.name, what, price, charged, added, "refused"))
                return "refused"
            if "Priced:" in text:
                run.steps.append(Step(self.name, f"{what} (its grouping's sizes)", price,
                                      charged, added, "priced"))
                shown = reply
                continue
            outcome = "free" if "Opened free" in text else "released" if reply.release_ids() \
                else "error"
            run.steps.append(Step(self.name, what, price, charged, added, outcome))
            return outcome
        return "error"

    def preset(self, run: Scenario, key: str) -> str:
        p = PRESETS[key]
        role = p.role.value if p.role and Role(self.role).rank >= p.role.rank else None
        return self.release(run, p.label.split(" —")[0], self.values(p.view, p.x, p.group,
                                                                      role))


def _publish(owner: Person, run: Scenario) -> str | None:
    """The owner's four-figure page for third parties, through the Publish page."""
    http = owner.client
    deps = json.loads(http.request("GET", "/_dash-dependencies").body)

    def call(output: str, values: dict, changed: tuple[str, str]) -> dict:
        body = callback_payload(deps, output, values, changed)
        for s in body["state"]:
            if str(s["id"]).startswith("{"):
                s["value"] = []
        return json.loads(http.post_json(body).body)

    keys = [json.dumps({"dataset": DATASET, "group": p.group, "view": p.view, "x": p.x},
                       sort_keys=True, separators=(",", ":")) for p in PRESETS.values()]
    form = {(ids.PUB_DATASET, "value"): DATASET, (ids.PUB_TITLE, "value"): "Paper figures",
            (ids.PUB_AUDIENCE, "value"): "third_party", (ids.PUB_USER, "value"): None,
            (ids.PUB_EXPIRES, "value"): (datetime.now(UTC) + timedelta(days=30)).date()
            .isoformat(), (ids.PUB_FIGURES, "value"): keys}
    before, loss = owner.ledger.budget(role=Role.THIRD_PARTY, dataset_id=DATASET).spent, \
        owner.loss()
    quoted = call(ids.PUB_QUOTE_OUT, form, (ids.PUB_QUOTE, "n_clicks"))
    store = quoted.get("response", {}).get(ids.PUB_QUOTED, {}).get("data") or {}
    done = call(ids.PUB_MESSAGE, {**form, (ids.PUB_QUOTED, "data"): store,
                                  (ids.PUB_CONFIRM, "n_clicks"): 1},
                (ids.PUB_CONFIRM, "n_clicks"))
    slug = re.search(r"/views/([a-z0-9-]+)", json.dumps(done))
    charged = owner.ledger.budget(role=Role.THIRD_PARTY, dataset_id=DATASET).spent - before
    run.steps.append(Step("olga", "publish Fig. 2–5 for third parties",
                          float(store.get("total", 0.0)) if store else None, charged,
                          owner.loss() - loss, "released" if slug else "error"))
    if not slug:
        run.notes.append(f"publishing failed: {json.dumps(done)[:300]}")
    return slug.group(1) if slug else None


def _open(person: Person, slug: str) -> int:
    """The number of figures a page shows its reader (it spends nothing)."""
    deps = json.loads(person.client.request("GET", "/_dash-dependencies").body)
    body = callback_payload(deps, ids.PAGE_CONTENT, {(ids.PAGE_LOCATION, "pathname"):
                                                     f"/views/{slug}"},
                            (ids.PAGE_LOCATION, "pathname"))
    page = json.dumps(json.loads(person.client.post_json(body).body))
    return page.count('"type": "Graph"')


def scenario(srv: GunicornApp, ledger: Ledger) -> Scenario:
    run = Scenario()
    people = {name: Person(srv, ledger, name) for name in USERS}
    owner = people["olga"]
    for key in PRESETS:
        owner.preset(run, key)
    p = PRESETS["fig2"]
    owner.release(run, "Fig. 2 compare mode", owner.values(p.view, p.x, p.group,
                                                           compare=True))
    for name in ("carl", "cleo", "tina", "theo"):
        person = people[name]
        for key in PRESETS:
            person.preset(run, key)
        for view, x, group in OWN_VIEWS[name]:
            person.release(run, f"{VIEWS[view].lower()} of {x}" + (f" by {group}" if group
                                                                     else ""),
                           person.values(view, x, group))
    slug = _publish(owner, run)
    if slug:
        shown = _open(people["tina"], slug)
        run.notes.append(f"the published page shows {shown} figures to tina")
    return run


def hammer(srv: GunicornApp, ledger: Ledger, seconds: float) -> dict:
    """A third party presses everything it can for ``seconds``."""
    from dp_engine.schema import ColumnKind
    from services.data.registry import SAMPLE_SCHEMA, read_schema_file
    from services.views.queries import GROUPABLE_KINDS

    person = Person(srv, ledger, "theo")
    schema = read_schema_file(SAMPLE_SCHEMA)
    cols = schema.queryable_columns()
    groups = [None] + [c.name for c in cols if c.kind in GROUPABLE_KINDS and c.categories]
    combos = []
    for x in cols:
        measured = x.kind in (ColumnKind.NUMERIC, ColumnKind.ORDINAL) and x.has_bounds
        for view in ("histogram", "mean", "median", "variance") if measured else ("histogram",):
            combos += [(view, x.name, g) for g in groups if g != x.name]
    role0 = ledger.budget(role=Role.THIRD_PARTY, dataset_id=DATASET).spent
    loss0 = ledger.dataset_loss(DATASET)
    presses = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and combos:
        view, x, group = combos.pop(0)
        values = person.values(view, x, group)
        for trigger in (ids.EX_VIEW, ids.EX_RELEASE, ids.EX_RELEASE):
            press(person.http, trigger, **values)
            presses += 1
            if time.perf_counter() >= end:
                break
    charged = ledger.budget(role=Role.THIRD_PARTY, dataset_id=DATASET).spent - role0
    grown = ledger.dataset_loss(DATASET) - loss0
    return {"seconds": seconds, "presses": presses, "charged": charged, "grown": grown}


def withheld_big_groups(ledger: Ledger) -> list[str]:
    """Every mean or box plot group of ≥ 100 patients (DP size) withheld in any answer."""
    out = []
    for rel in ledger.releases(dataset_id=DATASET, limit=None):
        ans = rel.answer
        if ans.get("view") not in ("mean", "median"):
            continue
        for g, n in enumerate(ans.get("group_n_estimate") or []):
            if n is not None and n >= 100 and (ans.get("withheld") or [False] * 99)[g]:
                out.append(f"#{rel.id} {rel.role}: {ans.get('groups', ['?'] * 99)[g]} "
                           f"(n̂ {n:.0f})")
    return out


def third_parties_hold_the_figures(ledger: Ledger) -> bool:
    from services.data.registry import SAMPLE_SCHEMA, read_schema_file
    from services.views.queries import ViewRequest

    schema = read_schema_file(SAMPLE_SCHEMA)
    held = {r.query_key for r in ledger.releases(dataset_id=DATASET, role=Role.THIRD_PARTY,
                                                 limit=None)}
    want = {ViewRequest(DATASET, p.view, p.x, p.group, "sound", Role.THIRD_PARTY)
            .query_key(schema) + "|as=third_party" for p in PRESETS.values()}
    return want <= held


def section(run: Scenario, loss: float, hammered: dict, problems: list[str], big: list[str],
            held: bool, command: str) -> str:
    mismatched = [s for s in run.steps if s.outcome in ("released", "priced")
                  and s.shown is not None and float(f"{s.charged:.3g}") != s.shown]
    # (the button shows 3 significant digits: the charge must round to exactly that)
    ok = {
        f"dataset loss after steps 1–4 ≤ {LOSS_TARGET:g}": loss <= LOSS_TARGET,
        "every third party holds all four paper figures": held,
        "no mean or box of a group of ≥ 100 patients withheld": not big,
        "nothing refused for budget": not run.refusals,
        "every charge equals the price shown before the press": not mismatched,
        "hammer: the loss grew by no more than the third party was charged":
            hammered["grown"] <= hammered["charged"] + 1e-9,
        "ledger invariants hold": not problems,
    }
    lines = [
        "## Collaboration scenario (issue 21)", "",
        f"Command: `{command}`. Default settings (budgets: collaborator 8, third party 5, "
        "dataset cap 30), PostgreSQL ledger, real sign-ins, 2 gunicorn workers.", "",
        "| target | result |", "|---|---|",
        *(f"| {k} | {'PASS' if v else 'FAIL'} |" for k, v in ok.items()), "",
        f"Dataset loss after steps 1–4: **ε {loss:.3f}** (cap 30). Hammer: "
        f"{hammered['presses']} presses in {hammered['seconds']:.0f} s, the third party "
        f"charged ε {hammered['charged']:.3f}, the dataset's loss grew by ε "
        f"{hammered['grown']:.3f}.", "",
        "| user | what | price shown | charged | dataset loss added | outcome |",
        "|---|---|---|---|---|---|",
        *(f"| {s.user} | {s.what} | {'–' if s.shown is None else f'{s.shown:.3g}'} | "
          f"{s.charged:.3f} | {s.loss_added:.3f} | {s.outcome} |" for s in run.steps), "",
    ]
    for title, items in (("Refused", run.refusals), ("Charged other than shown",
                                                    [f"{s.user}: {s.what}" for s in
                                                     mismatched]),
                         ("Withheld large groups", big), ("Invariants", problems),
                         ("Notes", run.notes)):
        if items:
            lines += [f"{title}:", "", *(f"- {i}" for i in items), ""]
    return "\n".join(lines)


def splice(text: str, new: str, title: str = "## Collaboration scenario (issue 21)") -> str:
    """``text`` with its section ``title`` replaced by ``new`` (appended if absent)."""
    start = text.find(title)
    if start < 0:
        return text.rstrip() + "\n\n" + new + "\n"
    end = text.find("\n## ", start + len(title))
    return text[:start] + new + ("\n" + text[end + 1:] if end >= 0 else "\n")


def run_all(database_url: str | None, seconds: float) -> tuple:
    """The whole scenario on a fresh app and ledger ('' or None: SQLite in the data
    directory; a PostgreSQL server URL: a fresh database, dropped after): (scenario, loss
    after steps 1-4, hammer figures, invariant problems, withheld large groups, whether the
    third parties hold the four figures)."""
    with tempfile.TemporaryDirectory(prefix="bench-collab-") as name, \
            ledger_database(database_url or None) as url:
        tmp = Path(name)
        url = url or f"sqlite:///{tmp / 'ledger.sqlite'}"
        users = tmp / "users.json"
        for user, role in USERS.items():
            add_user(users, user, role, PASSWORD)
        srv = GunicornApp({"COHORT_USERS_FILE": str(users), "DATABASE_URL": url,
                           "SECRET_KEY": "bench-collaboration-" + "k" * 40,
                           "COHORT_DATA_DIR": str(tmp / "data"),
                           "COHORT_LOGIN_CLIENT_MAX_FAILURES": "1000"}, tmp / "log",
                          workers=2)
        srv.start()
        ledger = Ledger(url)
        try:
            start = time.perf_counter()
            run = scenario(srv, ledger)
            loss = ledger.dataset_loss(DATASET)
            held = third_parties_hold_the_figures(ledger)
            big = withheld_big_groups(ledger)
            hammered = hammer(srv, ledger, seconds)
            problems = check_invariants(ledger)
            run.notes.append(f"scenario and hammer took {time.perf_counter() - start:.0f} s; "
                             f"load average {load_average()}")
        finally:
            ledger.close()
            srv.stop()
    return run, loss, hammered, problems, big, held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url",
                        default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--hammer", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    command = "python -m bench.bench_collaboration " + " ".join(argv or sys.argv[1:])
    outcome = run_all(args.database_url, args.hammer)
    text = section(*outcome, command)
    print(text)
    out = args.out
    old = out.read_text(encoding="utf-8") if out.exists() else header_markdown()
    out.write_text(splice(old, text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
