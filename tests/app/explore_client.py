"""Helpers to drive Explore callbacks over HTTP, exactly as a browser (or an attacker) would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from layouts import ids

RENDER_OUTPUTS = [(ids.EX_GRAPHS, "children"), (ids.EX_PANEL, "children"),
                  (ids.EX_MESSAGE, "children"), (ids.EX_ROW, "className")]
RENDER_INPUTS = [ids.EX_DATASET, ids.EX_ROLE, ids.EX_VIEW, ids.EX_X, ids.EX_GROUP,
                 ids.EX_MECHANISM, ids.EX_COMPARE]


@dataclass
class RenderReply:
    status: int
    body: dict[str, Any]
    text: str

    def prop(self, component_id: str) -> Any:
        return self.body.get("response", {}).get(component_id, {}).get("children")

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


def render(client, **values: Any) -> RenderReply:
    """POST the Explore render callback with the given input values."""
    defaults = {ids.EX_DATASET: "pirads", ids.EX_ROLE: "owner", ids.EX_VIEW: "histogram",
                ids.EX_X: "Age", ids.EX_GROUP: "PIRADS score", ids.EX_MECHANISM: "sound",
                ids.EX_COMPARE: False}
    names = {"dataset": ids.EX_DATASET, "role": ids.EX_ROLE, "view": ids.EX_VIEW, "x": ids.EX_X,
             "group": ids.EX_GROUP, "mechanism": ids.EX_MECHANISM, "compare": ids.EX_COMPARE}
    for k, v in values.items():
        defaults[names[k]] = v
    payload = {
        "output": ".." + "...".join(f"{i}.{p}" for i, p in RENDER_OUTPUTS) + "..",
        "outputs": [{"id": i, "property": p} for i, p in RENDER_OUTPUTS],
        "inputs": [{"id": i, "property": "value", "value": defaults[i]} for i in RENDER_INPUTS],
        "changedPropIds": [f"{ids.EX_VIEW}.value"],
        "state": [],
    }
    resp = client.post("/_dash-update-component", json=payload)
    text = resp.get_data(as_text=True)
    body = json.loads(text) if resp.status_code == 200 and text else {}
    return RenderReply(resp.status_code, body, text)
