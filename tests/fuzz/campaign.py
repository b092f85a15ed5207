"""A seeded fuzz campaign over every input kind: ``python -m tests.fuzz.campaign N [SEED [JOBS]]``.

``make fuzz N=100000`` runs it; ``tests/fuzz/test_fuzz.py`` runs a few thousand inputs of it
in ``make test``. The report counts inputs, failures by kind (traceback, hang, exit 0 with
different output, other). JOBS processes (default 2) each run their share from their own
seed (``SEED * 1000 + job``), so a run is reproduced by its N, SEED and JOBS.
"""

from __future__ import annotations

import collections
import multiprocessing
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from tests.fuzz.cases import Failures, ejson_case, replay_case, token_case, tokens_of
from tests.fuzz.seed_corpus import all_seed_corpora
from tests.fuzz.spark_case import spark_case

# Per 100 inputs: replay (mutated shards, every CLI path), the Spark source's readers,
# Extended JSON lines, tokens.
_MIX = (("replay", 60), ("spark", 10), ("ejson", 15), ("token", 15))
_KINDS = ("traceback", "hang", "exit 0 with different output", "other", "harness")
_SHOWN = 10  # failures printed in full per job


def campaign(count: int, seed: int, *, workers_every: int = 10) -> Iterator[tuple[str, Failures]]:
    """Yield (kind, failures) for each of ``count`` inputs drawn from ``seed``."""
    rng = random.Random(seed)
    corpora = all_seed_corpora()
    kinds = [kind for kind, _ in _MIX]
    weights = [weight for _, weight in _MIX]
    with tempfile.TemporaryDirectory(prefix="shardstream-fuzz-") as scratch:
        directory = Path(scratch)
        (directory / "tokens").mkdir()
        tokens = tokens_of(corpora[0], directory / "tokens")
        token_file = str(directory / "tokens" / f"{corpora[0][0][0]}.bson")
        for index in range(count):
            kind = rng.choices(kinds, weights)[0]
            corpus = corpora[rng.randrange(len(corpora))]
            try:
                if kind == "replay":
                    workers = index % workers_every == 0
                    failures = replay_case(rng, corpus, directory, workers=workers)
                elif kind == "spark":
                    failures = spark_case(rng, corpus, directory)
                elif kind == "ejson":
                    failures = ejson_case(rng, corpus, directory)
                else:
                    failures = token_case(rng, tokens, token_file)
            except Exception:  # the harness broke on this input: say so, go on with the rest
                failures = [(f"{kind} input {index}", f"harness: {traceback.format_exc()}")]
            yield kind, failures


def failure_kind(problem: str) -> str:
    """The report's class of a failure."""
    if problem.startswith("harness"):
        return "harness"
    if problem.startswith(("traceback", "reference crash")):
        return "traceback"
    if "hang" in problem.split("\n", 1)[0]:
        return "hang"
    if problem.startswith("exit 0 with different output"):
        return "exit 0 with different output"
    return "other"


_JobResult = tuple[dict[str, int], dict[str, int], list[str]]


def _job(args: tuple[int, int]) -> _JobResult:
    """One process's share: (inputs by kind, failures by class, the first failures in full)."""
    count, seed = args
    inputs: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    shown: list[str] = []
    for kind, failures in campaign(count, seed):
        inputs[kind] += 1
        for what, problem in failures:
            kinds[failure_kind(problem)] += 1
            if len(shown) < _SHOWN:
                shown.append(f"--- seed {seed}: {what}\n{problem}\n")
    return dict(inputs), dict(kinds), shown


def _run_jobs(shares: list[tuple[int, int]]) -> list[_JobResult]:
    """Each share in a forked process of its own; not a Pool, whose daemonic workers could not
    fork ``replay --workers``'s own workers."""
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.SimpleQueue[tuple[int, _JobResult]] = context.SimpleQueue()

    def work(index: int, share: tuple[int, int]) -> None:
        try:
            result = _job(share)
        except BaseException:  # the harness itself broke: say so instead of hanging the parent
            result = ({}, {"other": 1}, [f"--- the fuzz job crashed\n{traceback.format_exc()}"])
        queue.put((index, result))

    processes = [context.Process(target=work, args=(i, share)) for i, share in enumerate(shares)]
    for process in processes:
        process.start()
    results = dict(queue.get() for _ in processes)
    for process in processes:
        process.join()
    return [results[index] for index in range(len(shares))]


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 1000
    seed = int(argv[1]) if len(argv) > 1 else 0
    jobs = max(1, int(argv[2])) if len(argv) > 2 else 2
    started = time.monotonic()
    shares = [(count // jobs + (job < count % jobs), seed * 1000 + job) for job in range(jobs)]
    results = _run_jobs(shares)
    inputs: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    for job_inputs, job_kinds, shown in results:
        inputs.update(job_inputs)
        kinds.update(job_kinds)
        for text in shown:
            print(text, file=sys.stderr)  # noqa: T201
    elapsed = time.monotonic() - started
    total = sum(inputs.values())
    print(  # noqa: T201
        f"inputs: {total} ({dict(sorted(inputs.items()))}), seed {seed}, jobs {jobs}, "
        f"{elapsed:.0f} s"
    )
    for name in _KINDS:
        print(f"{name}: {kinds[name]}")  # noqa: T201
    return 1 if kinds else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
