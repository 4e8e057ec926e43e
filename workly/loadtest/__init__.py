"""`workly loadtest`: an open-loop load test through the API (run.py), to a no-op sink it runs
itself (sink.py), reported as the performance page's table (stats.py)."""

from workly.loadtest.run import LoadTest, LoadTestError, LoadTestInterrupted, run_load_test
from workly.loadtest.stats import Report

__all__ = ["LoadTest", "LoadTestError", "LoadTestInterrupted", "Report", "run_load_test"]
