"""``shardstream ingest``: the data source into the lakehouse tables, one streaming query.

``query`` builds and runs it (``settings``: what it reads and writes; ``batch_writers``: its
``foreachBatch``), ``session`` the SparkSession (``spark_home``: its workers' pyspark),
``progress`` the progress line, ``demo`` what ``make demo`` shows.
"""

from __future__ import annotations

import enum
from typing import Final

# Compaction every 100 micro-batches keeps a table at a few files per 100 batches' data
# (spark/delta/maintenance.py). Here, not in ``query``: the CLI reads it without importing
# deltalake or pyspark.
DEFAULT_OPTIMIZE_EVERY: Final = 100
# Worker processes preparing a large batch's mirror (spark/delta/mirror/workers.py). Off by
# default: on the 2-core development machine they speed the sinks alone up by about a fifth
# but leave an ingest under Spark unchanged (benchmarks/README.md, "Mirror workers").
DEFAULT_MIRROR_WORKERS: Final = 0

__all__ = [
    "DEFAULT_BUCKETS",
    "DEFAULT_MAX_COLUMNS",
    "DEFAULT_MIRROR_WORKERS",
    "DEFAULT_OPTIMIZE_EVERY",
    "MAX_BUCKETS",
    "MirrorLayout",
]
# The most field columns a collection's typed table gets (``--max-columns``); the rest of the
# fields are kept in its ``_rescued`` column (spark/delta/typed/rows.py).
DEFAULT_MAX_COLUMNS: Final = 500
# The bucketed mirror's bucket count when the ingest creates it (``--mirror-buckets``; fixed
# per table once written; spark/delta/mirror/bucketed/README.md says how to choose it).
DEFAULT_BUCKETS: Final = 16
MAX_BUCKETS: Final = 65_536


class MirrorLayout(enum.Enum):
    """How the ingest keeps the documents (``--mirror-layout``)."""

    COLLECTIONS = "collections"  # typed mirror/<db>/<coll> and history/<db>/<coll> tables
    SINGLE = "single"  # one table, <root>/mirror, documents as canonical Extended JSON
    # The single layout's table partitioned by a hash of the document _id, each bucket
    # rewritten by a Spark task, the driver committing (spark/delta/mirror/bucketed/).
    BUCKETED = "bucketed"
