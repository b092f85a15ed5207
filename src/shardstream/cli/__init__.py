"""The ``shardstream`` command line: one module per verb, ``options`` for the shared ones.

A top layer: it calls the public API and the engines below it, and nothing imports it.
"""

from __future__ import annotations

from shardstream.cli.main import main

__all__ = ["main"]
