"""The command-line client: commands that talk to a running Workly server over its API."""
