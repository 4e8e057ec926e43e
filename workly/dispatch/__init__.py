"""Delivery: the dispatcher loop (when), the deliverer (how) and the retry policy (what next)."""
