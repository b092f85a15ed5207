"""The session's ``SPARK_HOME``: Spark's Python workers import the installed pyspark (with
its bytecode), not the source-only zip pip's pyspark ships for them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from shardstream.spark.ingest.spark_home import use_workers_spark_home, workers_spark_home


def _installed(root: Path, *, zip_file: bool = True) -> Path:
    """A package laid out as pip installs pyspark."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (root / "jars").mkdir()
    (root / "jars" / "spark-core.jar").write_bytes(b"PK")
    (root / "python" / "lib").mkdir(parents=True)
    (root / "python" / "pyspark").mkdir()
    if zip_file:
        (root / "python" / "lib" / "pyspark.zip").write_bytes(b"PK")
    (root / "__init__.py").write_text("")
    return root


def test_the_home_links_every_entry_but_the_workers_zips(tmp_path: Path) -> None:
    installed = _installed(tmp_path / "pyspark")
    (tmp_path / "session").mkdir()
    home = workers_spark_home(tmp_path / "session", installed)
    assert home == tmp_path / "session" / "spark-home"
    assert sorted(entry.name for entry in home.iterdir()) == [
        "__init__.py",
        "bin",
        "jars",
        "python",
    ]
    for name in ("bin", "jars", "__init__.py"):
        assert (home / name).resolve() == (installed / name).resolve()
    assert (home / "bin" / "spark-submit").read_text() == "#!/bin/sh\n"
    assert not (home / "python").is_symlink()
    assert (home / "python" / "pyspark").resolve() == (installed / "python" / "pyspark")
    assert list((home / "python" / "lib").iterdir()) == []  # the zips' paths name nothing


def test_a_home_not_laid_out_as_pips_is_used_as_it_is(tmp_path: Path) -> None:
    installed = _installed(tmp_path / "pyspark", zip_file=False)
    (tmp_path / "session").mkdir()
    assert workers_spark_home(tmp_path / "session", installed) is None
    assert list((tmp_path / "session").iterdir()) == []


def test_a_spark_home_the_environment_names_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    use_workers_spark_home(tmp_path)
    assert os.environ["SPARK_HOME"] == "/opt/spark"
    assert list(tmp_path.iterdir()) == []


def test_without_one_the_installed_pyspark_gets_a_home_of_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyspark = pytest.importorskip("pyspark")
    monkeypatch.delenv("SPARK_HOME", raising=False)
    use_workers_spark_home(tmp_path)
    home = Path(os.environ["SPARK_HOME"])
    assert home == tmp_path / "spark-home"
    installed = Path(pyspark.__file__).parent
    assert (home / "jars").resolve() == (installed / "jars").resolve()
    assert not (home / "python" / "lib" / "pyspark.zip").exists()


def test_where_links_cannot_be_made_spark_keeps_its_own_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.delenv("SPARK_HOME", raising=False)

    def refuse(self: Path, target: Path) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(Path, "symlink_to", refuse)
    use_workers_spark_home(tmp_path)
    assert "SPARK_HOME" not in os.environ


@pytest.mark.spark
def test_the_sessions_workers_import_the_installed_pyspark(spark: Any) -> None:
    import pyspark

    if Path(os.environ.get("SPARK_HOME", "")).name != "spark-home":
        pytest.skip("the environment names its own SPARK_HOME, which the session keeps")

    def where(_: Any) -> list[str]:
        import pyspark as worker_pyspark

        return [worker_pyspark.__file__ or ""]

    found = spark.sparkContext.parallelize([0], 1).mapPartitions(where).collect()
    assert found == [pyspark.__file__]
