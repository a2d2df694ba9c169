"""Running the app in production: start-up checks, health endpoint, logging, env files."""
