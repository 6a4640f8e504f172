"""The SeaweedFS test server (tests/s3_server.py): a server that cannot start makes the
tests that need it fail with its log, never skip; a taken port is tried again."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from s3_server import SeaweedFailed, SeaweedServer


def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    server = SeaweedServer(tmp_path, extra_args=["-master.volumeSizeLimitMB=lots"])
    with pytest.raises(SeaweedFailed) as raised:
        server.start(timeout=30)
    message = str(raised.value)
    assert "weed server exited with status" in message
    assert 'invalid value "lots" for flag -master.volumeSizeLimitMB' in message
    assert server.process is None  # nothing left running


def test_a_port_taken_before_the_server_binds_it_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3_server

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    choose = s3_server._free_ports
    calls = []

    def first_one_taken(count: int) -> list[int]:
        ports = choose(count)
        calls.append(ports)
        if len(calls) == 1:
            ports[0] = taken.getsockname()[1]  # the master's port: someone has it
        return ports

    monkeypatch.setattr(s3_server, "_free_ports", first_one_taken)
    server = SeaweedServer(tmp_path)
    try:
        server.start()
        assert len(calls) == 2
        assert "address already in use" in (tmp_path / "weed.log").read_text()
        server.make_bucket()
    finally:
        server.stop()
        taken.close()
