"""callbacks package."""
