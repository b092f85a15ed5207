"""The one compiled module: the Extended JSON writer's C half, the reader of a change
event's row fields that uses it, and the fast path's check of an entry's bytes (everything
else is in pyproject).

``optional=True``: where no C compiler is found the install still succeeds and
``shardstream.transform.raw.extended_json`` writes everything with its Python walker (same
text, slower); ``tests/transform/test_raw_extended_json.py`` fails if the module is missing.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "shardstream.transform.raw._ejson",
            [
                "src/shardstream/transform/raw/_ejson.c",
                "src/shardstream/transform/raw/_event_fields.c",
                "src/shardstream/transform/raw/_bson_check.c",
            ],
            depends=["src/shardstream/transform/raw/_ejson.h"],
            optional=True,
        )
    ]
)
