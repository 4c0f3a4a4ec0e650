"""PySpark jobs over store directories: pure functions over the store readers, one module per job."""
