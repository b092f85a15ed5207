"""The one-table mirror: every document's current state, one Delta MERGE per batch, and the
per-collection layout's document state (``<root>/_mirror_state``); ``bucketed/`` the same
table rewritten by Spark's tasks (see README.md)."""
