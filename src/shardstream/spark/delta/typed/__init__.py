"""The per-collection typed tables (the default layout): each collection's typed mirror and
SCD2 history, where they live and how their columns are typed (see README.md)."""
