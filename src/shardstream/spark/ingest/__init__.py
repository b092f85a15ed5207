"""``shardstream ingest``: the data source into the lakehouse tables, one streaming query.

``query`` builds and runs it, ``session`` the SparkSession, ``progress`` the progress line,
``demo`` what ``make demo`` shows.
"""

from __future__ import annotations
