"""The embedded object store: a real S3 API over boto3, private, durable across restarts, and pausable."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from sluice.objectstore import ObjectStoreError, ObjectStoreServer, start_object_store

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client


def _client(store: ObjectStoreServer, *, key: str | None = None, timeout: float = 10) -> S3Client:
    return boto3.client(
        "s3", endpoint_url=store.endpoint, region_name=store.region,
        aws_access_key_id=key or store.access_key, aws_secret_access_key=key or store.secret_key,
        config=Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required",
                      response_checksum_validation="when_required", connect_timeout=timeout,
                      read_timeout=timeout, retries={"max_attempts": 1}))


def test_objects_round_trip_with_ranges_listing_multipart_and_deletes(object_store: ObjectStoreServer) -> None:
    s3 = _client(object_store)
    prefix = f"t-{uuid.uuid4().hex}/"
    small = os.urandom(1000)
    big = os.urandom(9 * 1024 * 1024)
    s3.put_object(Bucket=object_store.bucket, Key=prefix + "a", Body=small)
    s3.upload_fileobj(
        io.BytesIO(big), object_store.bucket, prefix + "b",
        Config=boto3.s3.transfer.TransferConfig(multipart_threshold=5 * 1024 * 1024))
    got = s3.get_object(Bucket=object_store.bucket, Key=prefix + "b", Range="bytes=100-4195")
    assert got["Body"].read() == big[100:4196]
    assert s3.head_object(Bucket=object_store.bucket, Key=prefix + "a")["ContentLength"] == 1000
    listed = s3.list_objects_v2(Bucket=object_store.bucket, Prefix=prefix)
    assert [o["Key"] for o in listed["Contents"]] == [prefix + "a", prefix + "b"]
    s3.delete_objects(Bucket=object_store.bucket, Delete={"Objects": [{"Key": prefix + "a"}]})
    listed = s3.list_objects_v2(Bucket=object_store.bucket, Prefix=prefix)
    assert [o["Key"] for o in listed["Contents"]] == [prefix + "b"]
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=object_store.bucket, Key=prefix + "a")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"


def test_an_unknown_access_key_is_refused(object_store: ObjectStoreServer) -> None:
    with pytest.raises(ClientError) as refused:
        _client(object_store, key="S3RVER").list_objects_v2(Bucket=object_store.bucket)
    assert refused.value.response["Error"]["Code"] == "InvalidAccessKeyId"


def test_objects_survive_a_restart_and_a_kill(tmp_path: Path) -> None:
    store = start_object_store(tmp_path / "store")
    key = store.access_key
    _client(store).put_object(Bucket=store.bucket, Key="k", Body=b"kept")
    assert store.pid is not None
    os.kill(store.pid, 9)
    store.stop()
    again = start_object_store(tmp_path / "store")
    try:
        assert again.access_key == key
        assert _client(again).get_object(Bucket=again.bucket, Key="k")["Body"].read() == b"kept"
        assert not [p for p in (tmp_path / "store").rglob("*.tmp-*")]
    finally:
        again.stop()


def test_a_paused_store_is_unavailable_until_resumed(object_store: ObjectStoreServer) -> None:
    key = f"paused-{uuid.uuid4().hex}"
    object_store.pause()
    try:
        with pytest.raises((ReadTimeoutError, ConnectTimeoutError)):
            _client(object_store, timeout=0.5).put_object(Bucket=object_store.bucket, Key=key + "-lost", Body=b"x")
    finally:
        object_store.resume()
    _client(object_store).put_object(Bucket=object_store.bucket, Key=key, Body=b"y")
    assert _client(object_store).get_object(Bucket=object_store.bucket, Key=key)["Body"].read() == b"y"


def test_a_missing_install_is_one_readable_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sluice.objectstore as module

    monkeypatch.setattr(module, "S3RVER", tmp_path / "absent")
    with pytest.raises(ObjectStoreError, match="make objectstore"):
        start_object_store(tmp_path / "store")
