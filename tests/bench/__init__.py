"""Tests of shardstream.bench."""

from __future__ import annotations
