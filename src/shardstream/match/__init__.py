"""A change stream's ``$match`` stages, evaluated client-side on each event.

``evaluator`` compiles a pipeline's ``$match`` stages into predicates; ``leaves`` holds the
per-operator tests, ``values`` and ``order`` BSON's type semantics and comparison order
(src/mongo/db/matcher/ and bsonobj comparison in the server).
"""

from __future__ import annotations

from shardstream.match.evaluator import compile_match, compile_pipeline

__all__ = ["compile_match", "compile_pipeline"]
