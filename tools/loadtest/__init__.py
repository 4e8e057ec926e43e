"""Workly's load test: open loop at a fixed rate through the HTTP API to a local no-op sink."""
