"""``shardstream bench``'s report files: the JSON document (``--json``) and the plot."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shardstream.bench.offline import Rate


def write_report(args: argparse.Namespace, rates: Sequence[Rate], report: dict[str, Any]) -> None:
    """Write ``--json`` and ``--plot`` when given (before stdout: kept if it closes early)."""
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    if args.plot:
        title = report.get("header") or f"window {report['start']} to {report['end']}"
        plot_rates(rates, title, args.plot)


def plot_rates(rates: Sequence[Rate], title: str, path: str) -> None:
    """A bar chart of the rates (needs matplotlib; without it, a note on stderr)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("shardstream bench: no plot: matplotlib is not installed", file=sys.stderr)
        return
    figure, axes = plt.subplots(figsize=(8, 3))
    names = [rate.name for rate in rates]
    axes.barh(names, [rate.per_second for rate in rates], color="#4a7ab5")
    axes.set_xlabel(f"{rates[0].unit if rates else 'entries'}/s")
    axes.set_title(title, fontsize=7)
    axes.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
