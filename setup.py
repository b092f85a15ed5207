"""The compiled modules (everything else is in pyproject): ``_ejson``, the Extended JSON
writer's C half, the reader of a change event's row fields that uses it, the cut of some
fields out of an event's bytes (``event_split``), and the fast path's check of an entry's
bytes; ``_json_read``, the canonical Extended JSON reader's C half
(``token_json.loads``) and a document's BSON from that text (``token_json.document_bson``); ``_framing``, the loop that frames an oplog file's documents for
its ``ts`` index (``oplog/ts_index.py``); ``_bson_columns``, a collection's typed
columns read from its documents' BSON (``spark/delta/typed/bson_columns.py``);
``_write_statements``, the sync's target write of a change event built from its bytes (``cluster_sync/write_statements.py``; it shares the
event walk and the bytes check with ``_ejson``).

``optional=True``: where no C compiler is found the install still succeeds and
``shardstream.transform.raw.extended_json`` writes everything with its Python walker (same
text, slower), ``token_json.loads`` reads with its Python hook, ``ts_index`` frames in Python, the sync plans every event in Python, the typed
columns are read value by value;
``tests/transform/test_raw_extended_json.py`` and ``tests/resume_token/test_json_read.py``
fail if a module is missing.
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shardstream.transform.raw._ejson",
            [
                "src/shardstream/transform/raw/_ejson.c",
                "src/shardstream/transform/raw/_ejson_scalars.c",
                "src/shardstream/transform/raw/_event_walk.c",
                "src/shardstream/transform/raw/_event_fields.c",
                "src/shardstream/transform/raw/_event_columns.c",
                "src/shardstream/transform/raw/_event_split.c",
                "src/shardstream/transform/raw/_bson_check.c",
            ],
            depends=[
                "src/shardstream/transform/raw/_ejson.h",
                "src/shardstream/transform/raw/_ejson_scalars.h",
                "src/shardstream/transform/raw/_event_walk.h",
            ],
            optional=True,
        ),
        Extension(
            "shardstream.cluster_sync._write_statements",
            [
                "src/shardstream/cluster_sync/_write_statements.c",
                "src/shardstream/cluster_sync/_update_pipeline.c",
                "src/shardstream/cluster_sync/_pipeline_stage.c",
                "src/shardstream/transform/raw/_event_walk.c",
                "src/shardstream/transform/raw/_bson_check.c",
            ],
            include_dirs=["src/shardstream/transform/raw"],
            depends=[
                "src/shardstream/transform/raw/_bson_out.h",
                "src/shardstream/cluster_sync/_update_pipeline.h",
                "src/shardstream/transform/raw/_ejson.h",
                "src/shardstream/transform/raw/_event_walk.h",
            ],
            optional=True,
        ),
        Extension(
            "shardstream.resume_token._json_read",
            [
                "src/shardstream/resume_token/_json_read.c",
                "src/shardstream/resume_token/_json_bson.c",
            ],
            depends=["src/shardstream/resume_token/_json_scan.h"],
            optional=True,
        ),
        Extension(
            "shardstream.oplog._framing",
            ["src/shardstream/oplog/_framing.c"],
            optional=True,
        ),
        Extension(
            "shardstream.transform.update._apply_diff",
            [
                "src/shardstream/transform/update/_apply_diff.c",
                "src/shardstream/transform/update/_diff_levels.c",
                "src/shardstream/transform/raw/_event_walk.c",
                "src/shardstream/transform/raw/_bson_check.c",
            ],
            include_dirs=["src/shardstream/transform/raw"],
            depends=[
                "src/shardstream/transform/update/_diff_levels.h",
                "src/shardstream/transform/raw/_bson_out.h",
                "src/shardstream/transform/raw/_ejson.h",
                "src/shardstream/transform/raw/_event_walk.h",
            ],
            optional=True,
        ),
        Extension(
            "shardstream.spark.delta.typed._bson_columns",
            [
                "src/shardstream/spark/delta/typed/_bson_columns.c",
                "src/shardstream/spark/delta/typed/_column_builder.c",
                "src/shardstream/transform/raw/_event_walk.c",
            ],
            include_dirs=["src/shardstream/transform/raw"],
            depends=[
                "src/shardstream/spark/delta/typed/_column_builder.h",
                "src/shardstream/transform/raw/_ejson.h",
                "src/shardstream/transform/raw/_event_walk.h",
            ],
            optional=True,
        ),
    ]
)
