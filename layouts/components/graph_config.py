"""The one Plotly config every graph of the app uses: nothing leaves the machine.

The vendored plotly.js bundle defaults to a "send to cloud" modebar button posting the chart's
data to plotly.com; every link and button that sends data elsewhere is switched off here and
its modebar button removed. The PNG download (made in the browser) stays.
"""

from __future__ import annotations

from typing import Any

OFF_MACHINE_BUTTONS = ("sendDataToCloud", "editInChartStudio")
"""Modebar buttons that send a chart (and its data) to an outside service."""

GRAPH_CONFIG: dict[str, Any] = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "sendData": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "plotlyServerURL": "",
    "modeBarButtonsToRemove": [*OFF_MACHINE_BUTTONS, "select2d", "lasso2d"],
    "toImageButtonOptions": {"format": "png", "filename": "cohort-explorer-figure", "scale": 2},
}
"""Config of every dcc.Graph (the shell's hidden preload graph is static: no modebar)."""
