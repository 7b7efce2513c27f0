"""gemmwatch API: settings, database models, wire schemas and HTTP routes."""
