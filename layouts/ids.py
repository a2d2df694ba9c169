"""Every Dash component id, in one place, so layouts and callbacks cannot drift apart."""

from __future__ import annotations

# --- shell (app frame, navigation, session) ---
URL = "url"
NAV = "nav"
PAGE = "page-content"
SESSION_BADGE = "session-badge"
PRELOAD_GRAPH = "preload-graph"
NAV_TOGGLE = "nav-toggle"
NAV_COLLAPSE = "nav-collapse"
PAGE_LOCATION = "_pages_location"
PAGE_CONTENT = "_pages_content"
"""Dash Pages' own location and page body (inside ``PAGE``): its router writes each page there."""

# --- Explore page ---
EX_DATASET = "explore-dataset"
EX_ROLE = "explore-role"
EX_PRESET = "explore-preset"
EX_VIEW = "explore-view"
EX_X = "explore-x"
EX_GROUP = "explore-group"
EX_WITHOUT = "explore-without"              # groups left out on purpose (multi-select)
EX_LEAVE_OUT = "explore-leave-out"          # the panel's "leave the costliest group out"
EX_MECHANISM = "explore-mechanism"
EX_COMPARE = "explore-compare"
EX_GRAPH = "explore-graph"
EX_GRAPHS = "explore-graphs"
EX_PANEL = "explore-panel"
EX_MESSAGE = "explore-message"
EX_LOADING = "explore-loading"
EX_BUDGET = "explore-budget"
EX_ROW = "explore-row"
EX_BUDGET_SHARED = "explore-budget-shared"
EX_RELEASE = "explore-release"              # the Release (ε …) button
EX_RELEASE_NOTE = "explore-release-note"
EX_PREVIEW_BANNER = "explore-preview-banner"
EX_MY_RELEASES = "explore-my-releases"
EX_REOPEN = "explore-reopen"                # My releases: choosing one reopens it (free)
EX_CSV = "explore-csv"                      # pattern type, index = release id
EX_REPORT = "explore-report"                # pattern type, index = release id
EX_DOWNLOAD = "explore-download"
EX_FOCUS = "explore-focus"                  # store: the Release press whose result took focus
# side-panel values (read by the end-to-end tests)
PANEL_ROLE = "panel-role"
PANEL_BAND = "panel-band"
PANEL_EPSILON = "panel-epsilon"
PANEL_SENSITIVITY = "panel-sensitivity"
PANEL_MECHANISM = "panel-mechanism"
PANEL_SPENT = "panel-spent"
PANEL_PRICING = "panel-pricing"           # a preview whose price is an estimate: what pricing does
PANEL_ERROR = "panel-error"
PANEL_REALIZED = "panel-realized"
PANEL_EFFECTIVE = "panel-effective"
PANEL_ODDS = "panel-odds"
PANEL_GROUPS = "panel-groups"
PANEL_DETAILS = "panel-details"       # the technical detail behind a disclosure

# --- Data page (datasets and schemas) ---
DATA_UPLOAD = "data-upload"
DATA_MESSAGE = "data-message"
DATA_TABLE = "data-schema-table"
DATA_CONFIRM = "data-confirm"
DATA_LIST = "data-list"
DATA_SAVE = "data-save"
DATA_OVERVIEW = "data-overview"
DATA_REPORT = "data-report"
DATA_PATIENT = "data-patient-column"
DATA_PATIENT_K = "data-patient-k"
DATA_PATIENT_K_CONFIRM = "data-patient-k-confirm"
DATA_CHECKLIST = "data-checklist"
DATA_DECISION = "data-decision"  # pattern-matching type: {"type": DATA_DECISION, "key": kind}
DATA_PUBLIC_SUMMARY = "data-public-summary"

# --- Ledger page ---
LEDGER_TABLE = "ledger-table"
LEDGER_FILTER_USER = "ledger-filter-user"
LEDGER_FILTER_DATASET = "ledger-filter-dataset"
LEDGER_TOTALS = "ledger-totals"
LEDGER_DATASETS = "ledger-datasets"
LEDGER_EXPORT = "ledger-export"
LEDGER_DOWNLOAD = "ledger-download"
LEDGER_SET_DATASET = "ledger-set-dataset"    # budget settings: which dataset ("*": all)
LEDGER_SET_KEY = "ledger-set-key"            # which setting
LEDGER_SET_VALUE = "ledger-set-value"        # its new value (empty: unlimited)
LEDGER_SET_SAVE = "ledger-set-save"
LEDGER_SET_MESSAGE = "ledger-set-message"
LEDGER_SETTINGS = "ledger-settings"          # the settings in force and their history

# --- Anonymize page ---
AN_DATASET = "anon-dataset"
AN_QIS = "anon-qis"
AN_SENSITIVE = "anon-sensitive"
AN_K = "anon-k"
AN_METHOD = "anon-method"
AN_SENSITIVE_MODE = "anon-sensitive-mode"
AN_RUN = "anon-run"
AN_REPORT = "anon-report"
AN_SCATTER_X = "anon-scatter-x"
AN_SCATTER_Y = "anon-scatter-y"
AN_SCATTER = "anon-scatter"
AN_SCATTER_TABLE = "anon-scatter-table"
AN_DOWNLOAD_BTN = "anon-download-btn"
AN_DOWNLOAD = "anon-download"
AN_MESSAGE = "anon-message"
AN_STORE = "anon-store"

# --- Publish page (owner) and published views (audience) ---
PUB_DATASET = "publish-dataset"
PUB_TITLE = "publish-title"
PUB_AUDIENCE = "publish-audience"
PUB_USER = "publish-user"
PUB_EXPIRES = "publish-expires"
PUB_FIGURES = "publish-figures"
PUB_SELECTED = "publish-selected"
PUB_CAPTION = "publish-caption"      # pattern-matching: {"type": PUB_CAPTION, "index": key}
PUB_ORDER = "publish-order"          # pattern-matching: {"type": PUB_ORDER, "index": key}
PUB_QUOTE = "publish-quote"
PUB_QUOTE_OUT = "publish-quote-out"
PUB_QUOTED = "publish-quoted"
PUB_CONFIRM = "publish-confirm"
PUB_MESSAGE = "publish-message"
PUB_LIST = "publish-list"
PUB_WITHDRAW = "publish-withdraw"    # pattern-matching: {"type": PUB_WITHDRAW, "index": slug}
PUB_COHORT_PERIOD = "publish-cohort-period"
PUB_COHORT_INCLUSION = "publish-cohort-inclusion"
PUB_COHORT_SOURCE = "publish-cohort-source"
PUB_COHORT_SAVE = "publish-cohort-save"
PUB_COHORT_MESSAGE = "publish-cohort-message"
VIEW_PAGE = "published-view"
VIEW_TOTAL = "published-total"
VIEW_FIGURE = "published-figure"     # pattern-matching graphs: {"type": ..., "index": n}
VIEW_COHORT = "published-cohort"
VIEW_METHODS = "published-methods"
DEMO_DECK = "demo-deck"

# --- Release studio (issue 15) ---
ST_PAGE = "studio-page"
ST_DATASET = "studio-dataset"
ST_COLUMNS = "studio-columns"
ST_TECH = "studio-technique"        # pattern-matching: {"type": ST_TECH, "index": column}
ST_EPS = "studio-epsilon"           # pattern-matching: {"type": ST_EPS, "index": column}
ST_SENS = "studio-sensitivity"      # pattern-matching: {"type": ST_SENS, "index": column}
ST_COLMSG = "studio-column-message"  # pattern-matching: {"type": ST_COLMSG, "index": column}
ST_TARGET = "studio-model-target"
ST_RUN = "studio-run"
ST_TUNE = "studio-tune"
ST_TOL_ERROR = "studio-tol-error"
ST_TOL_KS = "studio-tol-ks"
ST_TOL_CORR = "studio-tol-corr"
ST_TOL_MATCH = "studio-tol-match"
ST_TUNE_BUDGET = "studio-tune-budget"
ST_MESSAGE = "studio-message"
ST_RESULTS = "studio-results"
ST_TRAIL = "studio-trail"
ST_LAST = "studio-last-run"         # dcc.Store: the last run id (the table stays on the server)
ST_DL_CSV = "studio-download-csv"
ST_DL_JSON = "studio-download-json"
ST_DL_HTML = "studio-download-html"
ST_DOWNLOAD = "studio-download"
ST_INSIST = "studio-download-anyway"  # the owner takes a failed run's files anyway (recorded)
ST_INSIST_BOX = "studio-download-anyway-box"  # shown only under a failed run
ST_SYNTHETIC = "studio-synthetic"
ST_PROGRESS = "studio-progress"       # the per-record job's progress bar
ST_POLL = "studio-poll"               # dcc.Interval polling the per-record job (off when idle)
ST_CANCEL = "studio-cancel"           # stops the running per-record job (on while it runs)
ST_SYN_DATASET = "studio-synthetic-dataset"
ST_SYN_EPS = "studio-synthetic-epsilon"
ST_SYN_COLUMNS = "studio-synthetic-columns"
ST_SYN_SKIPPED = "studio-synthetic-skipped"
ST_SYN_OWNER = "studio-synthetic-owner"  # pattern-matching: owner-only ("target", "compare")
ST_SYN_RUN = "studio-synthetic-run"
ST_SYN_MESSAGE = "studio-synthetic-message"
ST_SYN_PROGRESS = "studio-synthetic-progress"
ST_SYN_POLL = "studio-synthetic-poll"
ST_SYN_CANCEL = "studio-synthetic-cancel"
ST_SYN_JOB = "studio-synthetic-job"   # dcc.Store: the job's token (the table stays on the server)
ST_SYN_RESULTS = "studio-synthetic-results"
ST_SYN_DL_CSV = "studio-synthetic-download-csv"
ST_SYN_DL_JSON = "studio-synthetic-download-json"
ST_SYN_DL_HTML = "studio-synthetic-download-html"
ST_SYN_DOWNLOAD = "studio-synthetic-download"
ST_SYN_CONFIRM = "studio-synthetic-confirm"   # "Spend ε …": a large spend, confirmed
ST_SYN_CONFIRM_BOX = "studio-synthetic-confirm-box"  # shown only while a spend asks first
ST_SYN_PENDING = "studio-synthetic-pending"   # dcc.Store: the request the confirm is for
