from tests.servers import cluster  # noqa: F401 - the namesrv + broker processes fixture
