"""Periodic database upkeep: one maintainer per job, one file each, run by ``Upkeep``.

Each maintainer has a name, an interval and a ``run``; ``Upkeep`` starts every one whose
interval is above zero and stops them together (the composition root, workly/service/
assembly.py, chooses which run and how often from the settings). They are:

- reaper.py: tasks whose lease expired go back to ready (every process runs it);
- retention.py: finished tasks past their retention go (WORKLY_RETENTION,
  WORKLY_FAILED_RETENTION, a queue's or tenant's own), then the events left without deliveries;
- running_recount.py: repairs PostgreSQL's per-queue count of deliveries in flight;
- breaker_probes.py: an open breaker past its cool-down releases one held task as a probe;
- queue_gauges.py: the queue depth and endpoint health gauges;
- count_fold.py: folds PostgreSQL's appended task counts into one row per queue and status;
- index_rebuilds.py: rebuilds PostgreSQL indexes grown far past their entries;
- history_writes.py: the dashboard's delivery counts, written and pruned;
- audit_pruning.py: audit log entries older than WORKLY_AUDIT_RETENTION go;
- vacuum.py: vacuums Workly's tables where the server does not.
"""

from workly.service.upkeep.maintainer import Maintainer, Upkeep

__all__ = ["Maintainer", "Upkeep"]
