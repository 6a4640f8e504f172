"""The blob store's errors: one base class, one subclass per thing that can go wrong."""

from __future__ import annotations


class BlobStoreError(Exception):
    """Base of every error a BlobStore raises."""


class InvalidBlobId(BlobStoreError, ValueError):
    """The string is not a blob id (a UUID); no path was built from it."""


class BlobNotFound(BlobStoreError, LookupError):
    """No blob has this id."""


class BlobCorrupt(BlobStoreError):
    """The blob's file exists but cannot be read back as its kind."""


class BlobIOError(BlobStoreError, OSError):
    """The file system refused a read or a write."""


class StoreUnavailable(BlobIOError):
    """The store did not answer: a timeout, a refused connection, an overloaded or failing
    server. Nothing is known about the blob; try again later. The message says what was
    being done, never where the store is."""


class IndexUnusable(Exception):
    """An index, or the blob it describes, is not what its reader expected (stale,
    damaged, shorter); the caller reads the blob without the index."""
