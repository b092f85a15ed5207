"""Tests of shardstream.replay."""

from __future__ import annotations
