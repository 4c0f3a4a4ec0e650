"""The ports tests and benchmarks start servers on (tests/ports.py)."""
import socket

from tests import ports


def test_ports_come_from_below_the_ephemeral_range_with_their_neighbours_free():
    low = ports._ephemeral_low()
    for _ in range(50):
        port = ports.free_port_pair()
        assert low - ports.BELOW - 3 <= port - 2 and port + 1 < low      # where no connect() lands
        for p in (port - 2, port, port + 1):
            with socket.socket() as s:
                s.bind(("127.0.0.1", p))


def test_a_port_in_use_is_never_chosen(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports.free_port()))
        busy = taken.getsockname()[1]
        picks = iter([busy + 2, busy - 1, busy, busy + 500])      # each triple overlaps `busy` but the last
        monkeypatch.setattr(ports.random, "randrange", lambda lo, hi: next(picks))
        assert ports.free_port_pair() == busy + 500


def test_without_room_below_the_ephemeral_range_the_kernel_chooses(monkeypatch):
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 1024)
    port = ports.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
