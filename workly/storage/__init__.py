"""Storage: the contract (contract/: narrow roles, and ``Storage``, what a backend opens),
one package per database (sqlite/, postgres/: a module per role, named SQL in sql/),
opened by factory.py from a database URL.

Nothing is imported here, so importing one storage module never imports the others."""
