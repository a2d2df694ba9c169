"""The web server's own hooks (Flask): sign-in sessions, the guard and body limits of every
request (``auth``), security headers (``headers``). The application core has no web
framework; these modules attach it to one server (``app.py`` adds ``/healthz``)."""
