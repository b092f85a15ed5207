"""Layer 5: Spark ingestion of the merged stream (the only package that imports pyspark).

Needs the ``spark`` extra (pyspark, pyarrow, deltalake).  :mod:`shardstream.spark.rows`
is the row schema shared by the data source and the lakehouse sinks.
"""
