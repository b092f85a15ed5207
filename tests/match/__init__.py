"""Tests of shardstream.match."""

from __future__ import annotations
