"""``python -m shardstream``: the same entry point as the ``shardstream`` script."""

from __future__ import annotations

import sys

from shardstream.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
