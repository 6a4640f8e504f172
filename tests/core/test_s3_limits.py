"""The object store client's limits (docs/object-storage.md#when-the-store-fails): its
timeouts and tries from the environment, the turns its requests take, and a store that
does not answer told apart from one that refuses."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from core.store.errors import BlobIOError, BlobStoreError, StoreUnavailable
from core.store.s3.client import Boto, TurnTakingClient, client_limits, io_error


def test_the_limits_have_defaults_and_come_from_the_environment():
    assert client_limits({}) == {
        "BLOBVIEWER_S3_CONNECT_TIMEOUT": 3.0,
        "BLOBVIEWER_S3_READ_TIMEOUT": 6.0,
        "BLOBVIEWER_S3_ATTEMPTS": 2,
        "BLOBVIEWER_S3_CONCURRENCY": 0,
    }
    limits = client_limits({"BLOBVIEWER_S3_READ_TIMEOUT": " 0.5 ", "BLOBVIEWER_S3_ATTEMPTS": "1"})
    assert limits["BLOBVIEWER_S3_READ_TIMEOUT"] == 0.5
    assert limits["BLOBVIEWER_S3_ATTEMPTS"] == 1


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("BLOBVIEWER_S3_READ_TIMEOUT", "soon", "a number of seconds above 0, not 'soon'"),
        ("BLOBVIEWER_S3_CONNECT_TIMEOUT", "0", "a number of seconds above 0, not '0'"),
        ("BLOBVIEWER_S3_CONNECT_TIMEOUT", "nan", "above 0, not 'nan'"),
        ("BLOBVIEWER_S3_READ_TIMEOUT", "inf", "above 0, not 'inf'"),
        ("BLOBVIEWER_S3_ATTEMPTS", "1.5", "a whole number above 0, not '1.5'"),
        ("BLOBVIEWER_S3_CONCURRENCY", "-1", "a whole number 0 or more, not '-1'"),
    ],
)
def test_a_bad_limit_is_refused_naming_its_variable(name, value, message):
    with pytest.raises(BlobStoreError, match="^" + name) as refused:
        client_limits({name: value})
    assert str(refused.value).endswith(message)


def test_a_store_that_does_not_answer_is_unavailable_without_its_address():
    Boto.load()
    url = "http://10.1.2.3:8333/secret-bucket/key"
    for error in (
        EndpointConnectionError(endpoint_url=url),
        ReadTimeoutError(endpoint_url=url, error="timed out"),
        ClientError({"Error": {"Code": "SlowDown"}, "ResponseMetadata": {}}, "GetObject"),
        ClientError({"Error": {}, "ResponseMetadata": {"HTTPStatusCode": 502}}, "HeadObject"),
    ):
        said = io_error("cannot read blob b", error)
        assert isinstance(said, StoreUnavailable), error
        assert str(said).startswith("cannot read blob b: the blob store is not answering (")
        assert "10.1.2.3" not in str(said) and "secret-bucket" not in str(said)


def test_a_store_that_refuses_is_an_io_error_saying_what_it_answered():
    Boto.load()
    refused = ClientError(
        {"Error": {"Code": "AccessDenied", "Message": "no"}, "ResponseMetadata": {}}, "GetObject"
    )
    said = io_error("cannot read blob b", refused)
    assert type(said) is BlobIOError
    assert str(said) == "cannot read blob b: AccessDenied (HTTP 0): no"


class _Meta:
    method_to_api_mapping = {"get_object": "GetObject"}


class _SlowClient:
    """A client whose get_object waits until it is let go."""

    meta = _Meta()

    def __init__(self) -> None:
        self.started = threading.Event()
        self.go = threading.Event()
        self.region = "here"

    def get_object(self, **params: str) -> str:
        self.started.set()
        self.go.wait(10)
        return params["Key"]


def test_requests_take_turns_and_one_that_gets_none_is_unavailable():
    slow = _SlowClient()
    client = TurnTakingClient(slow, 1, wait=0.05)
    holder = threading.Thread(target=client.get_object, kwargs={"Key": "a"})
    holder.start()
    assert slow.started.wait(5)

    with pytest.raises(StoreUnavailable, match="get_object: the blob store is not answering"):
        client.get_object(Key="b")
    assert client.region == "here"  # what is not a request is the client's own

    slow.go.set()
    holder.join(5)
    assert client.get_object(Key="c") == "c"  # the turn was given back
