"""Cluster phases as `sluice up` prints them: the Ready condition's reason, and one line per change."""

from __future__ import annotations

import pytest

from controlplane.clusters.selectors import ClusterPhase, cluster_phases, phase_changes, phase_of
from tests.controlplane.factories import ClusterFactory


def _ready(reason: str, status: str = "False") -> dict[str, object]:
    return {"conditions": [{"type": "Degraded", "status": "False", "reason": "AsExpected"},
                           {"type": "Ready", "status": status, "reason": reason}]}


@pytest.mark.parametrize(("status", "phase"), [
    ({}, "Pending"),
    ({"conditions": []}, "Pending"),
    ({"conditions": "garbage"}, "Pending"),
    ({"conditions": [{"type": "Degraded", "reason": "BrokersDown"}]}, "Pending"),
    (_ready("Provisioning"), "Provisioning"),
    (_ready("Running", "True"), "Running"),
    (_ready(""), "Pending"),
])
def test_phase_is_the_ready_reason(status: dict[str, object], phase: str) -> None:
    assert phase_of(status) == phase


A, B = ClusterPhase("demo", "demo", "Provisioning"), ClusterPhase("demo", "other", "Running")


@pytest.mark.parametrize(("before", "after", "lines"), [
    ({}, {}, []),
    ({"a": A}, {"a": A}, []),
    ({"a": A}, {"a": ClusterPhase("demo", "demo", "Running")}, ["cluster demo/demo: Provisioning → Running"]),
    ({"a": A}, {"a": A, "b": B}, ["cluster demo/other: Running"]),
    ({"a": A, "b": B}, {"b": B}, ["cluster demo/demo: deleted"]),
    ({"a": A, "b": B}, {"a": ClusterPhase("demo", "demo", "BrokersDown"), "b": B},
     ["cluster demo/demo: Provisioning → BrokersDown"]),
])
def test_phase_changes(before: dict[str, ClusterPhase], after: dict[str, ClusterPhase], lines: list[str]) -> None:
    assert phase_changes(before, after) == lines


@pytest.mark.django_db
def test_cluster_phases_reads_every_cluster_in_one_query(django_assert_num_queries: object) -> None:
    one = ClusterFactory(status=_ready("Running", "True"))
    two = ClusterFactory(tenant=one.tenant, status={})
    with django_assert_num_queries(1):  # type: ignore[operator]
        phases = cluster_phases()
    assert phases == {str(one.pk): ClusterPhase(one.tenant.slug, one.name, "Running"),
                      str(two.pk): ClusterPhase(one.tenant.slug, two.name, "Pending")}
