"""PySpark jobs over store directories and live clusters; `register(spark)` adds the `rocketmq` format."""


def register(spark) -> None:
    """Register the `rocketmq` data source (read, readStream, write, writeStream) on a SparkSession."""
    from mqtool.spark.datasource import RocketMQDataSource
    spark.dataSource.register(RocketMQDataSource)
