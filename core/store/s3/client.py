"""The object store's client: boto3 imported on first use, one client per process and
settings (made from the environment: ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION``), the answers of the
object store told apart (:func:`answered`) and turned into core.store.errors
(:func:`io_error`: one line, never a botocore traceback), and ``s3://bucket/prefix`` URLs.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from core.store.errors import BlobIOError, BlobStoreError

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


class Boto:
    """boto3 and botocore's error classes, imported when the first client is made."""

    errors: tuple[type[Exception], ...] = ()
    client_error: type[Exception] = Exception

    @classmethod
    def load(cls) -> None:
        if not cls.errors:
            from botocore.exceptions import BotoCoreError, ClientError  # only S3 needs boto

            cls.client_error = ClientError
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
        with cls.lock:
            client = cls.clients.get(key)
            if client is None:
                client = cls.clients[key] = cls._new_client(endpoint_url, region, config)
            return client

    @staticmethod
    def _new_client(endpoint_url: str | None, region: str | None, config: dict[str, Any]) -> Any:
        import boto3
        from botocore.config import Config

        settings: dict[str, Any] = {
            "max_pool_connections": 32,
            "retries": {"mode": "standard", "max_attempts": 3},
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
    """One line that says what failed and what the object store answered."""
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
