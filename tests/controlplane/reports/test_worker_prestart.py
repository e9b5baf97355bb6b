"""Which worker prestarts the report runner: the one consuming the reports queue, whatever Celery sends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.conf import settings

from controlplane.reports.worker import _is_reports_worker


def _consumer(*queues: str) -> SimpleNamespace:
    return SimpleNamespace(task_consumer=SimpleNamespace(queues=[SimpleNamespace(name=q) for q in queues]))


@pytest.mark.parametrize(("sender", "prestarts"), [
    (_consumer(settings.SLUICE_REPORTS_QUEUE), True),  # worker_ready's sender: the Consumer
    (SimpleNamespace(consumer=_consumer(settings.SLUICE_REPORTS_QUEUE)), True),  # a WorkController
    (_consumer("sluice"), False),
    (_consumer(), False),
    (SimpleNamespace(), False),
    (None, False),
])
def test_only_the_reports_queue_worker_prestarts(sender: object, prestarts: bool) -> None:
    assert _is_reports_worker(sender) is prestarts
