"""The object store's client: boto3 imported on first use, one client per process and
settings (made from the environment: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``), the answers of the
object store told apart (:func:`answered`) and turned into core.store.errors
(:func:`io_error`: one line, never a botocore traceback), and ``s3://bucket/prefix`` URLs.

A store that hangs must not hang its callers, so every client has explicit limits, each
from the environment (docs/object-storage.md#when-the-store-fails):

- ``BLOBVIEWER_S3_CONNECT_TIMEOUT`` (3 s) and ``BLOBVIEWER_S3_READ_TIMEOUT`` (6 s, the
  longest wait for the next bytes of an answer);
- ``BLOBVIEWER_S3_ATTEMPTS`` (2): tries of one request in all, so a store that does not
  answer fails a request in about 13 s;
- ``BLOBVIEWER_S3_CONCURRENCY`` (unlimited unless set; the site's server sets it one
  below its threads): requests waiting on the store at once in this process. One more
  waits up to the connect timeout for a turn, then fails: threads that need no store
  stay free while it hangs.

A request the store does not answer raises StoreUnavailable.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from core.store.errors import BlobIOError, BlobStoreError, StoreUnavailable

S3_SCHEME = "s3://"
NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
PRECONDITION = {"412", "PreconditionFailed"}
CONFLICT = {"409", "ConditionalRequestConflict"}  # AWS: a concurrent conditional write
BAD_RANGE = {"416", "InvalidRange"}
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
)


# The limits of every client, and their defaults (see the module's docstring).
LIMITS = {
    "BLOBVIEWER_S3_CONNECT_TIMEOUT": 3.0,
    "BLOBVIEWER_S3_READ_TIMEOUT": 6.0,
    "BLOBVIEWER_S3_ATTEMPTS": 2,
    "BLOBVIEWER_S3_CONCURRENCY": 0,  # 0: unlimited
}
# The answers that mean the store is down or overloaded rather than refusing this request.
_UNAVAILABLE_CODES = {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout"}
NOT_ANSWERING = "the blob store is not answering"


class Boto:
    """boto3 and botocore's error classes, imported when the first client is made."""

    errors: tuple[type[Exception], ...] = ()
    client_error: type[Exception] = Exception
    no_answer: tuple[type[Exception], ...] = ()  # timeouts, refused or dropped connections

    @classmethod
    def load(cls) -> None:
        if not cls.errors:
            from botocore.exceptions import (  # only S3 needs boto
                BotoCoreError,
                ClientError,
                HTTPClientError,
            )
            from botocore.exceptions import ConnectionError as NoConnection

            cls.client_error = ClientError
            cls.no_answer = (NoConnection, HTTPClientError)
            cls.errors = (BotoCoreError, ClientError)

    # Making a client costs ~0.1 s (boto3 reads its models and config files): one per
    # process, endpoint, credentials and config is made and shared (clients are thread-safe).
    clients: dict[tuple[Any, ...], Any] = {}
    lock = threading.Lock()

    @classmethod
    def client(cls, endpoint_url: str | None = None, **config: Any) -> Any:
        cls.load()
        endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        key = (
            os.getpid(),
            endpoint_url,
            region,
            *(os.environ.get(name) for name in _CREDENTIAL_VARIABLES),
            repr(sorted(config.items())),
        )
        limits = client_limits(os.environ)
        key += tuple(limits.values())
        with cls.lock:
            client = cls.clients.get(key)
            if client is None:
                client = cls._new_client(endpoint_url, region, limits, config)
                if limits["BLOBVIEWER_S3_CONCURRENCY"]:
                    client = TurnTakingClient(
                        client,
                        limits["BLOBVIEWER_S3_CONCURRENCY"],
                        wait=limits["BLOBVIEWER_S3_CONNECT_TIMEOUT"],
                    )
                cls.clients[key] = client
            return client

    @staticmethod
    def _new_client(
        endpoint_url: str | None,
        region: str | None,
        limits: dict[str, Any],
        config: dict[str, Any],
    ) -> Any:
        import boto3
        from botocore.config import Config

        settings: dict[str, Any] = {
            "max_pool_connections": 32,
            "connect_timeout": limits["BLOBVIEWER_S3_CONNECT_TIMEOUT"],
            "read_timeout": limits["BLOBVIEWER_S3_READ_TIMEOUT"],
            "retries": {"mode": "standard", "max_attempts": limits["BLOBVIEWER_S3_ATTEMPTS"]},
        }
        if endpoint_url:  # a self-hosted server: bucket names in the path, not in DNS
            settings["s3"] = {"addressing_style": "path"}
        settings.update(config)
        return boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint_url,
            region_name=region or "us-east-1",
            config=Config(**settings),
        )


def client_limits(environ: Any) -> dict[str, Any]:
    """The client's limits from *environ* (LIMITS' names), defaults for those unset;
    BlobStoreError naming the variable for a value that is not a number > 0 (>= 0 for
    the concurrency, where 0 is no limit)."""
    limits: dict[str, Any] = {}
    for name, default in LIMITS.items():
        text = (environ.get(name) or "").strip()
        if not text:
            limits[name] = default
            continue
        kind = type(default)
        try:
            value = kind(text)
        except ValueError:
            value = -1
        zero_allowed = name == "BLOBVIEWER_S3_CONCURRENCY"
        if not (value >= 0 if zero_allowed else value > 0) or value == float("inf"):
            what = "a whole number" if kind is int else "a number of seconds"
            floor = "0 or more" if zero_allowed else "above 0"
            raise BlobStoreError(f"{name} must be {what} {floor}, not {text!r}")
        limits[name] = value
    return limits


class TurnTakingClient:
    """A boto3 client whose requests take turns: at most *concurrency* at once in this
    process. A request that gets no turn within *wait* seconds raises StoreUnavailable
    (the store is slow to answer the ones holding the turns). Everything else (``meta``,
    ``exceptions``, paginators) is the client's own."""

    def __init__(self, client: Any, concurrency: int, *, wait: float) -> None:
        self._client = client
        self._turns = threading.BoundedSemaphore(concurrency)
        self._wait = wait
        self._operations = frozenset(client.meta.method_to_api_mapping)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name not in self._operations:
            return attribute

        def in_turn(*args: Any, **kwargs: Any) -> Any:
            if not self._turns.acquire(timeout=self._wait):
                raise StoreUnavailable(f"{name}: {NOT_ANSWERING} (every turn is taken)")
            try:
                return attribute(*args, **kwargs)
            finally:
                self._turns.release()

        return in_turn


def _code(error: Exception) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def _http_status(error: Exception) -> int:
    response = getattr(error, "response", None) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def answered(error: Exception, codes: set[str]) -> bool:
    """Whether the error is one of *codes*: by its S3 error code when it has one (a missing
    bucket is a 404 too, but not a missing object), else by its HTTP status (HEAD)."""
    code = _code(error)
    if code and not code.isdigit():
        return code in codes
    return str(_http_status(error)) in codes


def io_error(action: str, error: Exception) -> BlobIOError:
    """One line that says what failed and what the object store answered: a
    StoreUnavailable when it did not answer (the message then names the error's kind, not
    the endpoint botocore's message names) or answered that it is down or overloaded."""
    if isinstance(error, Boto.no_answer):
        return StoreUnavailable(f"{action}: {NOT_ANSWERING} ({type(error).__name__})")
    if isinstance(error, Boto.client_error) and (
        _code(error) in _UNAVAILABLE_CODES or _http_status(error) >= 500
    ):
        return StoreUnavailable(f"{action}: {NOT_ANSWERING} ({_code(error) or 'error'})")
    if isinstance(error, Boto.client_error):
        response = getattr(error, "response", {}) or {}
        message = response.get("Error", {}).get("Message") or ""
        said = f"{_code(error) or 'error'} (HTTP {_http_status(error)})"
        if message:
            said += f": {message}"
    else:
        said = str(error) or type(error).__name__
    return BlobIOError(" ".join(f"{action}: {said}".split()))


def parse_s3_url(url: str) -> tuple[str, str]:
    """The bucket and prefix of ``s3://bucket/prefix`` (prefix without edge slashes)."""
    if not isinstance(url, str) or not url.startswith(S3_SCHEME):
        raise BlobStoreError(f"not an S3 URL: {url!r} (expected s3://bucket/prefix)")
    bucket, _, prefix = url[len(S3_SCHEME) :].partition("/")
    if not _BUCKET.match(bucket):
        raise BlobStoreError(
            f"not an S3 bucket name: {bucket!r} in {url!r} "
            "(3 to 63 characters: lowercase letters, digits, dots and hyphens)"
        )
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise BlobStoreError(f"not an S3 prefix: {prefix!r} in {url!r}")
    return bucket, prefix
