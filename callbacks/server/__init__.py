"""The web server's own hooks (Flask): sign-in sessions and the guard, security headers, body
limits, the health check and Dash's set-up. The application core has no web framework; these
modules attach it to one server."""
