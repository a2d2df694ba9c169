/* Accessibility fixes for third-party widgets whose markup the app cannot set from Python.
 *
 * - Dash 4's dcc.Dropdown names its button by its value only and keeps a focusable helper
 *   input that is aria-hidden: the button is named "<label> <value>" from the
 *   <label for=...> that layouts/components/accessible.py puts beside it, takes Tab focus itself,
 *   and the helper input is made inert.
 * - A label pointing at a container (dcc.Upload) names the input inside it.
 * - dash_table's dropdown cells (react-select): named by their column header and row; their
 *   value, not an option of any list box, loses its stray option role.
 * - Tables that scroll sideways (Bootstrap .table-responsive) can be scrolled by keyboard.
 * Served from /assets, so it runs under the Content-Security-Policy ('self').
 */
(function () {
  "use strict";
  const LABELABLE = new Set(["INPUT", "SELECT", "TEXTAREA", "BUTTON", "METER", "OUTPUT",
                             "PROGRESS"]);

  function labelId(label) {
    if (!label.id) { label.id = label.htmlFor + "--label"; }
    return label.id;
  }

  function nameDropdown(button, label) {
    const want = labelId(label) + " " + button.id + "-value-count " + button.id + "-value";
    if (button.getAttribute("aria-labelledby") !== want) {
      button.setAttribute("aria-labelledby", want);
    }
    if (button.getAttribute("tabindex") !== "0") { button.setAttribute("tabindex", "0"); }
    const helper = button.parentElement &&
      button.parentElement.querySelector(":scope > .dash-dropdown-focus-target");
    if (helper && !helper.inert) { helper.inert = true; }
  }

  function fixLabels(root) {
    root.querySelectorAll("label[for]").forEach(function (label) {
      const target = document.getElementById(label.htmlFor);
      if (!target) { return; }
      if (target.matches("button.dash-dropdown")) { nameDropdown(target, label); return; }
      if (LABELABLE.has(target.tagName)) { return; }
      const inner = target.querySelector("input:not([type=hidden]), select, textarea");
      if (inner && !inner.hasAttribute("aria-labelledby")) {
        inner.setAttribute("aria-labelledby", labelId(label));
      }
    });
  }

  function fixTableDropdowns(root) {
    root.querySelectorAll(".dash-spreadsheet td .Select").forEach(function (select) {
      const cell = select.closest("td");
      const column = cell && cell.getAttribute("data-dash-column");
      const table = select.closest("table");
      const header = table && column &&
        table.querySelector("th[data-dash-column='" + CSS.escape(column) + "']");
      const row = cell && cell.parentElement;
      const first = row && row.querySelector("td");
      const name = [header ? header.textContent.trim() : column,
                    first && first !== cell ? first.textContent.trim() : ""]
        .filter(Boolean).join(", ");
      const input = select.querySelector("input");
      if (input && name && input.getAttribute("aria-label") !== name) {
        input.setAttribute("aria-label", name);
      }
      const values = ".Select-value [role=option], .Select-value[role=option]";
      select.querySelectorAll(values).forEach(function (v) {
        v.removeAttribute("role");
        v.removeAttribute("aria-selected");
      });
    });
  }

  function fixScrollRegions(root) {
    root.querySelectorAll(".table-responsive:not([tabindex])").forEach(function (box) {
      box.setAttribute("tabindex", "0");
      box.setAttribute("role", "region");
      const caption = box.querySelector("caption");
      let heading = caption;
      for (let el = box; !heading && el && el !== document.body; el = el.parentElement) {
        let prev = el.previousElementSibling;
        while (prev && !/^H[1-6]$/.test(prev.tagName)) { prev = prev.previousElementSibling; }
        heading = prev;
      }
      box.setAttribute("aria-label", heading ? heading.textContent.trim() : "Table");
    });
  }

  let queued = false;
  function fixAll() {
    queued = false;
    fixLabels(document);
    fixTableDropdowns(document);
    fixScrollRegions(document);
  }
  function schedule() {
    if (!queued) { queued = true; window.requestAnimationFrame(fixAll); }
  }
  new MutationObserver(schedule).observe(document.documentElement,
                                         {childList: true, subtree: true});
  schedule();
}());
