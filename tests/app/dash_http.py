"""Build a ``/_dash-update-component`` request from ``/_dash-dependencies``, as the browser does.

Tests that post to a real server use this so they follow the app's callback signatures
instead of copying them.
"""

from __future__ import annotations

from typing import Any


def _key(item: dict) -> tuple[str, str]:
    return str(item["id"]), str(item["property"])


def _outputs(output: str) -> list[dict[str, str]]:
    parts = output.strip(".").split("...") if output.startswith("..") else [output]
    return [{"id": p.rsplit(".", 1)[0], "property": p.rsplit(".", 1)[1]} for p in parts]


def callback_payload(dependencies: list[dict], output_id: str, values: dict[tuple[str, str], Any],
                     changed: tuple[str, str]) -> dict:
    """The body of one call of the callback that writes ``output_id``.

    ``values`` maps (component id, property) to what the browser would send; inputs and
    states not named are sent as None. ``changed`` is the input that fired.
    """
    dep = next(d for d in dependencies if f"{output_id}." in d["output"])
    outputs = _outputs(dep["output"])
    return {
        "output": dep["output"],
        "outputs": outputs if len(outputs) > 1 else outputs[0],
        "inputs": [{**i, "value": values.get(_key(i))} for i in dep["inputs"]],
        "state": [{**s, "value": values.get(_key(s))} for s in dep["state"]],
        "changedPropIds": [f"{changed[0]}.{changed[1]}"],
    }


def find_hidden_input(node: Any, name: str) -> str | None:
    """The value of the first ``<input name=...>`` in a Dash component tree (JSON)."""
    if isinstance(node, dict):
        props = node.get("props", {})
        if node.get("type") == "Input" and props.get("name") == name:
            return props.get("value")
        for child in (props.get("children"), *(v for k, v in node.items() if k != "props")):
            found = find_hidden_input(child, name)
            if found is not None:
                return found
    elif isinstance(node, list):
        for child in node:
            found = find_hidden_input(child, name)
            if found is not None:
                return found
    return None
