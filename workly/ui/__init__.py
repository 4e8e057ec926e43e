"""The web dashboard at /ui: server-rendered pages over the same storage the API uses."""
