"""A SparkSession for mqtool's jobs: same interpreter on the workers, Spark's log in a file."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from store.errors import StoreError

INSTALL_HINT = "pyspark is not installed: pip install 'mqtool[spark]'"


class SparkUnavailable(StoreError):
    """pyspark or Java is missing."""


def require_pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable(INSTALL_HINT) from None
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise SparkUnavailable("Java is not installed (Spark needs Java 17): install a JDK or set JAVA_HOME")


def log4j_config(log_file: Path) -> Path:
    """Spark's own log goes to `log_file`; the terminal gets no Java stack traces."""
    conf = log_file.with_suffix(".log4j2.properties")
    conf.write_text(
        "rootLogger.level = warn\nrootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\nappender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n")
    return conf


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "mqtool",
                  log_dir: Path | None = None):
    require_pyspark()
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark.sql import SparkSession
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="mqtool-spark-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "spark.log"
    l4j = log4j_config(log_file)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_opts = f"-Dlog4j.configurationFile=file:{l4j} -Dlog4j2.configurationFile=file:{l4j}"
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.pyspark.python", sys.executable)
               .config("spark.driver.extraJavaOptions", java_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session, log_file
