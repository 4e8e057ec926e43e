"""Storage: one contract (base.py: ``Storage``), one backend per database (sqlite.py,
postgres.py), named SQL per dialect (sql/), opened by factory.py from a database URL.

Nothing is imported here, so importing one storage module never imports the others."""
