"""A snapshot (``ingest --snapshot``) into the tables, each in the commit that creates it,
and the marks that commit carries (see README.md)."""
