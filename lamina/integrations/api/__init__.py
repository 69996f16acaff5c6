"""The parts of the HTTP API (`lamina.integrations.http.create_app` puts them together)."""
