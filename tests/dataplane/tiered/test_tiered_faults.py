"""The remote tier under faults: the store away for a while, the leader killed mid-upload and mid-deletion."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from dataplane.storage.remote.manager import HOOK_ENV
from sluice.objectstore import ObjectStoreServer
from tests.dataplane.tiered.conftest import (
    EARLIEST,
    EARLIEST_LOCAL,
    LATEST,
    LATEST_TIERED,
    LogStartMoved,
    consume_all,
    create_topic,
    list_offset,
    produce,
    remote_args,
    s3,
)
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until

TIERED = {"remote.storage.enable": "true", "segment.bytes": "16384", "local.retention.bytes": "32768"}


def test_store_unavailable_keeps_local_segments_and_produce_going(
        tiered_broker: BrokerProcess, object_store: ObjectStoreServer) -> None:
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    port = tiered_broker.port
    create_topic(tiered_broker.bootstrap, topic, TIERED)
    sent = produce(tiered_broker.bootstrap, topic, 1000)
    wait_until(lambda: list_offset(port, topic, LATEST_TIERED) >= 0, "a first upload")
    object_store.pause()
    try:
        sent += produce(tiered_broker.bootstrap, topic, 3000, start=1000)  # produce goes on
        assert list_offset(port, topic, LATEST) == 4000
        # Nothing above offset 1000 can have been uploaded, so nothing above it left local disk.
        assert list_offset(port, topic, EARLIEST_LOCAL) <= 1000
        assert list_offset(port, topic, LATEST_TIERED) < 1000
        segments = len(list((tiered_broker.data_dir / f"{topic}-0").glob("*.log")))
        assert segments * 16384 > 3000 * 100  # local retention (32 KiB) exceeded many times over, nothing deleted
    finally:
        object_store.resume()
    wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > 3000, "uploads after the store came back",
               timeout=180, detail=lambda: tiered_broker.output()[-3000:])
    got = consume_all(tiered_broker.bootstrap, topic, 4000)
    assert [o for o, _, _ in got] == list(range(4000))
    assert [(k, v) for _, k, v in got] == sent


def _broker(tmp_path: Path, store: ObjectStoreServer, prefix: str) -> BrokerProcess:
    return BrokerProcess(tmp_path / "data", f"tier-{uuid.uuid4().hex[:12]}", extra_args=remote_args(store, prefix))


@pytest.mark.parametrize("step", ["upload", "delete"])
def test_leader_killed_mid_upload_or_deletion_loses_nothing_and_reads_nothing_twice(
        step: str, tmp_path: Path, object_store: ObjectStoreServer, prefix: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL between an upload's data and metadata objects, or between a remote deletion's metadata and data
    objects (the test hook holds the broker there); after a restart every offset is read once, in order."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    monkeypatch.setenv(HOOK_ENV, str(hooks))
    (hooks / f"hold-{step}").touch()
    broker = _broker(tmp_path, object_store, prefix)
    broker.start()
    topic = f"tiered-{uuid.uuid4().hex[:8]}"
    configs = dict(TIERED)
    if step == "delete":  # total retention deletes remote segments: the partition keeps ~100 KiB
        configs.update({"retention.bytes": "100000", "local.retention.bytes": "32768"})
    try:
        create_topic(broker.bootstrap, topic, configs)
        sent = produce(broker.bootstrap, topic, 3000)
        wait_until(lambda: list(hooks.glob(f"{step}-*")), f"the broker held in its {step}", timeout=120,
                   detail=lambda: broker.output()[-3000:])
        broker.stop(signal.SIGKILL)
    finally:
        broker.stop(signal.SIGKILL)
    (hooks / f"hold-{step}").unlink()
    broker.start()
    try:
        port = broker.port
        if step == "upload":
            # The interrupted upload left data objects without metadata: invisible, and read by nobody.
            keys = [o.key for o in s3(object_store).list_objects(f"{prefix}/")]
            assert any(k.endswith(".log") for k in keys)
            wait_until(lambda: list_offset(port, topic, EARLIEST_LOCAL) > 2000, "uploads after the restart",
                       timeout=120, detail=lambda: broker.output()[-3000:])
            assert list_offset(port, topic, EARLIEST) == 0
            got = consume_all(broker.bootstrap, topic, 3000)
            assert [o for o, _, _ in got] == list(range(3000))
            assert [(k, v) for _, k, v in got] == sent
        else:
            wait_until(lambda: list_offset(port, topic, EARLIEST) > 0, "remote retention after the restart",
                       timeout=120, detail=lambda: broker.output()[-3000:])

            def from_the_log_start() -> tuple[int, list[tuple[int, bytes, bytes]]]:
                # Retention may go on deleting while a slow reader is still below it: that read fails with
                # LogStartMoved (never a silent gap) and is tried again from the new log start.
                start = list_offset(port, topic, EARLIEST)
                return start, consume_all(broker.bootstrap, topic, 3000, start=start)

            start, got = wait_until(from_the_log_start, "a read from the log start", timeout=240,
                                    retry_on=(LogStartMoved,))
            first = got[0][0]
            assert first <= start  # the batch holding the log start
            assert [o for o, _, _ in got] == list(range(first, 3000))
            assert [(k, v) for _, k, v in got] == sent[first:]
    finally:
        broker.stop(signal.SIGKILL)
