"""The Explore page: controls (page), the answer panel, the free preview, My releases, the
drawn-once stored charts (rendered)."""
