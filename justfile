# Workly tasks. Each recipe uses the project's virtualenv in .venv
# (create it with: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]').

venv := ".venv/bin"

# Run on SQLite (./workly.db), one process
dev *args:
    {{venv}}/workly dev {{args}}

# Run in production mode (needs WORKLY_DATABASE_URL, WORKLY_SIGNING_SECRET and WORKLY_API_TOKENS)
serve *args:
    {{venv}}/workly serve {{args}}

# The whole test suite, lint and type checks included (tests/test_lint.py)
test *args:
    {{venv}}/python -m pytest {{args}}

# ruff check, ruff format --check and mypy
lint:
    {{venv}}/python -m ruff check .
    {{venv}}/python -m ruff format --check .
    {{venv}}/python -m mypy

# Load test against a running server (`just dev` or `just serve`), e.g. just loadtest -rate 1000 -duration 20s
loadtest *args:
    {{venv}}/python -m tools.loadtest {{args}}

# Mixed load under faults, then the books balanced, e.g. just soak -backend sqlite -duration 10m -rate 300
soak *args:
    {{venv}}/python -m tools.soak {{args}}
