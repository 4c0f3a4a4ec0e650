"""PySpark jobs over store directories and live clusters; `register(spark)` adds the `rocketmq` format."""
import warnings

# PySpark warns on import, from SparkSession.builder.getOrCreate(), when pandas is 3 or newer; the
# `spark` extra installs a pandas it supports, and this keeps the advisory out of a user's terminal
# where another pandas is installed (the README's scripts import mqtool.spark before the session).
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


def register(spark) -> None:
    """Register the `rocketmq` data source (read, readStream, write, writeStream) on a SparkSession.

    On a local master, its Python workers run this interpreter unless PYSPARK_PYTHON or
    spark.pyspark.python says otherwise; on a cluster master, one line on stderr names that setting."""
    from mqtool.spark.datasource import RocketMQDataSource
    from mqtool.spark.workers import use_driver_python
    use_driver_python(spark)
    spark.dataSource.register(RocketMQDataSource)
