"""dp_engine package."""
