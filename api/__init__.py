"""gemmwatch API: the FastAPI app (which mounts the dashboard), its routes, wire schemas and auth."""
