"""The bucketed mirror: one table of every document, partitioned by a hash of its ``_id``,
each bucket rewritten by the Spark task that applies its events, every rewrite of a batch
committed by the driver at once (``--mirror-layout bucketed``; see README.md)."""
