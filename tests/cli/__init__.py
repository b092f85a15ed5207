"""Tests of shardstream.cli."""

from __future__ import annotations
