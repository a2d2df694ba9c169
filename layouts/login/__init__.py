"""The sign-in page (plain HTML, served before Dash)."""
