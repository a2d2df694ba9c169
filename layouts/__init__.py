"""layouts package."""
