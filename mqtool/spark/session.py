"""A SparkSession for mqtool's jobs: same interpreter on the workers, Spark's log in a file.

The JVM is started with a log4j2 config that sends everything to `spark.log`, and with its
stderr pointed at the same file, so neither log lines nor Java stack traces reach the
terminal. Errors raised through py4j become one-line `SparkJobError`s.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from mqtool_store.errors import StoreError

INSTALL_HINT = "pyspark is not installed: pip install 'mqtool[spark]'"
JAVA_HINT = "Java is not installed (Spark needs Java 17 or newer): install a JDK or set JAVA_HOME"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class SparkUnavailable(StoreError):
    """pyspark or Java is missing."""


class SparkJobError(StoreError):
    """A Spark job failed; the details are in the Spark log."""


def require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise SparkUnavailable(INSTALL_HINT) from None
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if not shutil.which("java"):
        raise SparkUnavailable(JAVA_HINT)


def log4j_config(log_file: Path) -> Path:
    conf = log_file.with_name("log4j2.properties")
    conf.write_text(
        "rootLogger.level = info\nrootLogger.appenderRef.file.ref = file\n"
        "appender.file.type = File\nappender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
        "logger.jetty.name = org.sparkproject.jetty\nlogger.jetty.level = warn\n")
    return conf


def is_loopback_master(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname if "://" in master else None
    return host in LOOPBACK


@contextmanager
def _stderr_to(path: Path):
    """Point fd 2 at `path` while the JVM starts: the JVM (and the Python workers it forks) inherit it."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "mqtool",
                  log_dir: Path | None = None):
    """(SparkSession, path of Spark's log file). Raises SparkUnavailable without pyspark or Java."""
    require_pyspark()
    import warnings
    warnings.filterwarnings("ignore", module="pyspark")
    from pyspark.sql import SparkSession
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="mqtool-spark-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "spark.log"
    l4j = log4j_config(log_file)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if is_loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_opts = f"-Dlog4j.configurationFile=file:{l4j} -Dlog4j2.configurationFile=file:{l4j}"
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .config("spark.driver.extraJavaOptions", java_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "8192"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    try:
        with _stderr_to(log_file):
            session = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - py4j/JVM start-up failures
        raise SparkJobError(f"Spark did not start: {one_line(exc)} (log: {log_file})") from None
    return session, log_file


def one_line(exc: BaseException) -> str:
    """The first meaningful line of a py4j/Spark exception."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("pyspark.errors", "org.apache", "java.", "py4j.", "Caused by:")) and ":" in ln:
            return ln[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]


@contextmanager
def job_errors(log_file: Path):
    """Spark/py4j errors raised inside the block become one SparkJobError naming the log."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - py4j, Spark SQL and worker errors have no common base
        for line in _python_worker_error(exc):
            raise SparkJobError(f"the Spark job failed: {line} (log: {log_file})") from None
        raise SparkJobError(f"the Spark job failed: {one_line(exc)} (log: {log_file})") from None


def _python_worker_error(exc: BaseException):
    """The last line of a Python traceback inside a worker error, e.g. 'FormatError: ...'."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback (most recent call last)"):
            tail = [x for x in lines[i + 1:] if not x.startswith(("File ", "^", "~")) and ":" in x
                    and not x.startswith(("at ", "JVM stacktrace"))]
            if tail:
                yield tail[-1][:300]
            return
