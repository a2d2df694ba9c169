"""Helpers to drive Explore callbacks over HTTP, exactly as a browser (or an attacker) would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from layouts import ids

RENDER_OUTPUTS = [(ids.EX_VIEW, "value"), (ids.EX_X, "value"), (ids.EX_GROUP, "value"),
                  (ids.EX_WITHOUT, "value"), (ids.EX_ROLE, "value"), (ids.EX_MECHANISM, "value"),
                  (ids.EX_COMPARE, "value"), (ids.EX_PRESET, "value"),
                  (ids.EX_PRESET, "options"), (ids.EX_REOPEN, "value"),
                  (ids.EX_REOPEN, "options"), (ids.EX_GRAPHS, "children"),
                  (ids.EX_PANEL, "children"), (ids.EX_MESSAGE, "children"),
                  (ids.EX_ROW, "className"), (ids.EX_RELEASE, "children"),
                  (ids.EX_RELEASE, "disabled"), (ids.EX_RELEASE_NOTE, "children")]
RENDER_INPUTS = [(ids.EX_PRESET, "value"), (ids.EX_DATASET, "value"), (ids.EX_ROLE, "value"),
                 (ids.EX_VIEW, "value"), (ids.EX_X, "value"), (ids.EX_GROUP, "value"),
                 (ids.EX_WITHOUT, "value"), (ids.EX_MECHANISM, "value"),
                 (ids.EX_COMPARE, "value"),
                 (ids.EX_RELEASE, "n_clicks"), (ids.EX_REOPEN, "value")]
NAMES = {"dataset": ids.EX_DATASET, "role": ids.EX_ROLE, "view": ids.EX_VIEW, "x": ids.EX_X,
         "group": ids.EX_GROUP, "without": ids.EX_WITHOUT, "mechanism": ids.EX_MECHANISM,
         "compare": ids.EX_COMPARE,
         "preset": ids.EX_PRESET, "reopen": ids.EX_REOPEN}


@dataclass
class RenderReply:
    status: int
    body: dict[str, Any]
    text: str

    def prop(self, component_id: str, prop: str = "children") -> Any:
        return self.body.get("response", {}).get(component_id, {}).get(prop)

    @property
    def release_label(self) -> str:
        return str(self.prop(ids.EX_RELEASE))

    @property
    def preview(self) -> bool:
        """True when the graphs area carries the preview banner."""
        return ids.EX_PREVIEW_BANNER in json.dumps(self.prop(ids.EX_GRAPHS))

    def reopen_options(self) -> list[dict]:
        return self.prop(ids.EX_REOPEN, "options") or []

    def release_ids(self) -> list[str]:
        """Release ids named by the export buttons under the figures."""
        found: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                cid = node.get("props", {}).get("id")
                if isinstance(cid, dict) and cid.get("type") == ids.EX_CSV:
                    found.append(cid["index"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(self.prop(ids.EX_GRAPHS))
        return found

    @property
    def message(self) -> str:
        return json.dumps(self.prop(ids.EX_MESSAGE))

    @property
    def panel_text(self) -> str:
        return json.dumps(self.prop(ids.EX_PANEL), ensure_ascii=False)

    def figures(self) -> list[dict]:
        """Every plotly figure in the graphs area."""
        found: list[dict] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                props = node.get("props", {})
                if node.get("type") == "Graph" and "figure" in props:
                    found.append(props["figure"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(self.prop(ids.EX_GRAPHS))
        return found


PRICED = "Priced: this grouping"
"""The note of the pricing step (callbacks/explore.py price_screen)."""


def post(client, changed: str, **values: Any) -> RenderReply:
    """POST the Explore screen callback as if ``changed`` (a component id) fired."""
    sent: dict[str, Any] = {ids.EX_PRESET: None, ids.EX_DATASET: "pirads",
                            ids.EX_ROLE: "owner", ids.EX_VIEW: "histogram", ids.EX_X: "Age",
                            ids.EX_GROUP: "PIRADS score", ids.EX_WITHOUT: [],
                            ids.EX_MECHANISM: "sound",
                            ids.EX_COMPARE: False, ids.EX_REOPEN: None}
    for k, v in values.items():
        sent[NAMES[k]] = v
    clicks = 1 if changed == ids.EX_RELEASE else 0
    prop_of = dict(RENDER_INPUTS)
    payload = {
        "output": ".." + "...".join(f"{i}.{p}" for i, p in RENDER_OUTPUTS) + "..",
        "outputs": [{"id": i, "property": p} for i, p in RENDER_OUTPUTS],
        "inputs": [{"id": i, "property": p,
                    "value": clicks if p == "n_clicks" else sent[i]} for i, p in RENDER_INPUTS],
        "changedPropIds": [f"{changed}.{prop_of[changed]}"],
        "state": [],
    }
    resp = client.post("/_dash-update-component", json=payload)
    text = resp.get_data(as_text=True)
    body = json.loads(text) if resp.status_code == 200 and text else {}
    return RenderReply(resp.status_code, body, text)


def render(client, **values: Any) -> RenderReply:
    """Press Release with the given control values (spends, unless already released).

    A view whose grouping has no DP group sizes yet is priced by the first press (dataset
    loss only, the page then shows the exact price); the user presses again to release."""
    reply = post(client, ids.EX_RELEASE, **values)
    if PRICED in reply.text:
        reply = post(client, ids.EX_RELEASE, **values)
    return reply


def price(client, **values: Any) -> RenderReply:
    """Press Release once (prices an unpriced view, releases a priced one)."""
    return post(client, ids.EX_RELEASE, **values)


def preview(client, changed: str = ids.EX_VIEW, **values: Any) -> RenderReply:
    """Change a control (``changed``) with the given values: a free preview."""
    return post(client, changed, **values)


def reopen(client, release_id: str, **values: Any) -> RenderReply:
    """Choose an item of My releases."""
    return post(client, ids.EX_REOPEN, reopen=release_id, **values)


def preset(client, key: str, **values: Any) -> RenderReply:
    """Choose a preset (a one-click release)."""
    return post(client, ids.EX_PRESET, preset=key, **values)
