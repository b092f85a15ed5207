"""The change log, ``<root>/changelog``: every event appended once, by the driver (``table``)
or as Parquet files the Spark tasks write and the driver commits (``task_files``; see
README.md)."""
