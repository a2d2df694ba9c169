"""The Publish page (owner), the published view ``/views/<slug>`` and its demo, and the page's
self-contained HTML export."""
