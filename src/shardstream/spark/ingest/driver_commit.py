"""The driver's side of a batch Spark's tasks wrote: their messages collected, their files
committed.

The tasks (``task_writes.EventTasks``, or the per-collection layout's two rounds,
``collection_stage.collection_rounds``) each output one row, a pickled
:class:`~shardstream.spark.ingest.task_writes.Written` naming its files; :func:`run_tasks`
collects them (a few rows a batch: no event reaches this process).  :func:`commit_written`
adds the change log's files in one Delta commit, then the document table's bucket
rewrites in another, each with the batch's markers, in the in-driver sink's order: a crash
between the two leaves the documents behind, and the replay completes them.  A commit
that fails (an error, not a kill) deletes the files of the tables that lack the batch, as
Spark's ``abort`` of a data source write would; a killed task's or driver's files are
never referenced, and ``vacuum`` removes them.

This runs in the driver's own process, not in a Spark data source's writer: such a
writer's planning and commit each run in a Python worker of their own kind on the driver,
and each kind's first start cost ~2.5 s a query (``make demo``'s first batch); the
commit's work is the same either way.
"""

from __future__ import annotations

from typing import Any

from shardstream.spark.delta.changelog.table import CHANGELOG_TABLE
from shardstream.spark.delta.changelog.task_files import commit_changelog_files
from shardstream.spark.delta.commits import BatchCommit, already_committed, open_table
from shardstream.spark.delta.mirror.bucketed.bucket_commit import commit_buckets
from shardstream.spark.ingest.task_writes import WriterOptions, Written


def run_tasks(tasks: Any) -> Written:
    """Run ``tasks`` (a DataFrame of the tasks' message rows) and join their messages."""
    return Written.unpickled(row.message for row in tasks.collect())


def commit_written(options: WriterOptions, written: Written) -> None:
    """Commit what the tasks wrote: the change log's files, then the documents' buckets.

    Raises:
        Exception: a commit's own error, after the files of every table that lacks the
            batch are deleted.
    """
    options.maybe_crash("commit")
    try:
        if options.log:
            logs = written.changelogs
            commit_changelog_files(options.root, logs, options.app_id, options.batch_id)
        options.maybe_crash("between")
        if options.documents_version >= 0 and written.last_event is not None:
            commit = BatchCommit(
                app_id=options.app_id, batch_id=options.batch_id, watermark=written.last_event
            )
            path = options.root / options.documents_table
            commit_buckets(
                path, options.documents_version, written.buckets, commit, options.documents_table
            )
    except Exception:
        discard_uncommitted(options, written)
        raise


def discard_uncommitted(options: WriterOptions, written: Written) -> None:
    """Delete the files ``written`` added to the tables that lack the batch.

    A table that committed the batch keeps them: they are its data now (the documents'
    commit may fail after the change log's).
    """
    batch = BatchCommit(app_id=options.app_id, batch_id=options.batch_id, watermark="")
    done = {
        name: already_committed(open_table(options.root / name), batch, name)
        for name in (CHANGELOG_TABLE, options.documents_table)
    }
    if not done[CHANGELOG_TABLE]:
        for log in written.changelogs:
            if log.name is not None:
                (options.root / CHANGELOG_TABLE / log.name).unlink(missing_ok=True)
    if not done[options.documents_table]:
        for write in written.buckets:
            if write.added is not None:
                path = options.root / options.documents_table / write.added.path
                path.unlink(missing_ok=True)
