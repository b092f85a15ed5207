"""The ``shardstream`` Spark data source: offsets, batch planning, partitions and rows.

``data_source`` is what Spark calls (it imports pyspark); ``rows`` (the Arrow schema),
``offsets`` and ``options`` need only pyarrow, so nothing is imported here eagerly.
"""

from __future__ import annotations
