"""The object store the remote tier writes to: a small protocol and its S3 implementation (boto3).

Only what the tier needs: whole-object writes (from a file or bytes), ranged reads, listing by prefix, batched
deletes and HEAD. Every failure (network, throttling, a missing object, a paused server) surfaces as one
:class:`RemoteStorageError`, so callers have one thing to retry on; botocore's own retries are bounded and its
timeouts short, so an unavailable store costs a caller seconds, never a hang.

No conditional writes are used (s3rver and some S3-compatible stores lack them): every key is written once.

Thread-safety: an :class:`S3ObjectStore` is safe to share between threads (boto3 clients are thread-safe); it
is owned by the broker's :class:`~dataplane.storage.remote.manager.RemoteLogManager`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import boto3
import botocore.config
import botocore.exceptions

DELETE_BATCH = 1000  # DeleteObjects' limit


class RemoteStorageError(Exception):
    """The object store could not do what was asked (unavailable, refused, or the object is missing)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    last_modified_ms: int


class Readable(Protocol):
    """A file-like source of bytes (boto3 streams a body from ``read``)."""

    def read(self, n: int = -1, /) -> bytes: ...


class ObjectStore(Protocol):
    """What the remote tier needs from an object store (keys are written once, never overwritten)."""

    def put_file(self, key: str, source: Readable, size: int) -> None: ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object (fewer at its end)."""

    def list_objects(self, prefix: str) -> list[ObjectInfo]: ...

    def delete_many(self, keys: Sequence[str]) -> None: ...

    def head(self, key: str) -> ObjectInfo | None: ...


@dataclass(frozen=True, slots=True)
class S3Settings:
    endpoint: str
    bucket: str
    region: str = "us-east-1"
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 20.0
    max_attempts: int = 3


class S3ObjectStore:
    """An S3 bucket (any S3-compatible server) through boto3, path-style addressing."""

    def __init__(self, settings: S3Settings) -> None:
        self.settings = settings
        self.bucket = settings.bucket
        config = botocore.config.Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": settings.max_attempts, "mode": "standard"},
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.read_timeout_s,
            max_pool_connections=32,
        )
        self._client: Any = boto3.session.Session().client(
            "s3", endpoint_url=settings.endpoint, region_name=settings.region,
            aws_access_key_id=settings.access_key or None, aws_secret_access_key=settings.secret_key or None,
            config=config)

    def put_file(self, key: str, source: Readable, size: int) -> None:
        with _errors(f"upload of {key}"):
            self._client.put_object(Bucket=self.bucket, Key=key, Body=source, ContentLength=size)

    def put_bytes(self, key: str, data: bytes) -> None:
        with _errors(f"upload of {key}"):
            self._client.put_object(Bucket=self.bucket, Key=key, Body=data)

    def get(self, key: str) -> bytes:
        with _errors(f"read of {key}"):
            body = self._client.get_object(Bucket=self.bucket, Key=key)["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        with _errors(f"read of {key} [{start}, {end})"):
            body = self._client.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        found: list[ObjectInfo] = []
        with _errors(f"listing of {prefix}"):
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", ()):
                    found.append(ObjectInfo(item["Key"], int(item["Size"]),
                                            int(item["LastModified"].timestamp() * 1000)))
        return found

    def delete_many(self, keys: Sequence[str]) -> None:
        for chunk in _chunks(keys, DELETE_BATCH):
            with _errors(f"deletion of {len(chunk)} objects"):
                answer = self._client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
            failed = [e for e in answer.get("Errors", ()) if e.get("Code") != "NoSuchKey"]
            if failed:
                raise RemoteStorageError(f"deletion of {failed[0].get('Key')} failed: {failed[0].get('Message')}")

    def head(self, key: str) -> ObjectInfo | None:
        try:
            with _errors(f"HEAD of {key}"):
                answer = self._client.head_object(Bucket=self.bucket, Key=key)
        except RemoteStorageError as exc:
            if exc.missing:
                return None
            raise
        return ObjectInfo(key, int(answer["ContentLength"]), int(answer["LastModified"].timestamp() * 1000))


def _chunks(keys: Sequence[str], n: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(keys), n):
        yield keys[i : i + n]


class _errors:
    """Translate boto3/botocore failures into RemoteStorageError (a context manager, no allocation per call)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        if isinstance(exc, botocore.exceptions.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            missing = code in ("NoSuchKey", "404", "NotFound")
            raise RemoteStorageError(f"{self.what}: {code or exc}", missing=missing) from exc
        if isinstance(exc, (botocore.exceptions.BotoCoreError, OSError)):
            raise RemoteStorageError(f"{self.what}: {exc}") from exc


