"""REST API v1 (FastAPI)."""
