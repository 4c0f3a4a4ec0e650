"""One local SparkSession (2 cores) shared by every Spark test of the session."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'mqtool[spark]')")
    from mqtool.spark.session import spark_session
    session, _log = spark_session("local[2]", {"spark.sql.shuffle.partitions": "4"},
                                  log_dir=tmp_path_factory.mktemp("sparklog"))
    yield session
    session.stop()
