"""The message columns every mqtool Spark job reads and writes: `spark export`'s Parquet and the
`rocketmq` data source (which adds `broker_name`). One list, so the two never drift apart."""
from __future__ import annotations

COLUMNS = [
    ("topic", "string"), ("queue_id", "int"), ("queue_offset", "bigint"), ("commitlog_offset", "bigint"),
    ("store_size", "int"), ("body", "binary"), ("body_crc", "int"), ("crc_ok", "boolean"), ("flag", "int"),
    ("sys_flag", "int"), ("born_timestamp", "bigint"), ("born_host", "string"), ("store_timestamp", "bigint"),
    ("store_host", "string"), ("reconsume_times", "int"), ("prepared_transaction_offset", "bigint"),
    ("tags", "string"), ("keys", "array<string>"), ("msg_id", "string"), ("uniq_key", "string"),
    ("properties", "map<string,string>"), ("store_date", "date"),
]
LIVE_COLUMNS = COLUMNS + [("broker_name", "string")]


def ddl(columns=COLUMNS) -> str:
    return ", ".join(f"{n} {t}" for n, t in columns)


SCHEMA_DDL = ddl(COLUMNS)
LIVE_SCHEMA_DDL = ddl(LIVE_COLUMNS)


def arrow_schema(columns=COLUMNS):
    import pyarrow as pa
    types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "binary": pa.binary(),
             "boolean": pa.bool_(), "array<string>": pa.list_(pa.string()),
             "map<string,string>": pa.map_(pa.string(), pa.string()), "date": pa.date32()}
    return pa.schema([(n, types[t]) for n, t in columns])


def live_arrow_schema():
    return arrow_schema(LIVE_COLUMNS)
