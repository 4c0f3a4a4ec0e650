"""The name server: a pure route table and the request handlers that serve it."""
