"""``shardstream bench``: replay throughput offline, and ours against mongos's native stream live.

``offline`` and ``corpus`` measure replays of generated oplogs; ``live`` (one window) and
``latency`` / ``tail`` / ``latency_report`` (a live tail) read a cluster; ``emulated`` is the
emulated cluster they can run on; ``common`` what the live modes share. Nothing is imported
here: the live modes import pymongo, which the offline mode and the CLI's start-up avoid.
"""

from __future__ import annotations
