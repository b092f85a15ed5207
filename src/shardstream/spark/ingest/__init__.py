"""``shardstream ingest``: the data source into the lakehouse tables, one streaming query.

``query`` builds and runs it, ``session`` the SparkSession, ``progress`` the progress line,
``demo`` what ``make demo`` shows.
"""

from __future__ import annotations

from typing import Final

# Compaction every 100 micro-batches keeps a table at a few files per 100 batches' data
# (spark/delta/maintenance.py). Here, not in ``query``: the CLI reads it without importing
# deltalake or pyspark.
DEFAULT_OPTIMIZE_EVERY: Final = 100

__all__ = ["DEFAULT_OPTIMIZE_EVERY"]
