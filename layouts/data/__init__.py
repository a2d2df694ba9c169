"""The Data page (owner): upload, schema review and confirmation."""
