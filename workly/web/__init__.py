"""HTTP pieces the API (workly/api) and the dashboard (workly/ui) share without importing
each other: problem details, API tokens and sessions, the outer guards, request bodies,
the JSON shape of tasks and queues, and how a request reaches the service."""
