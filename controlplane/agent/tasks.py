"""Tasks an agent runs for the control plane, on its own queue ``agent.<host>``.

Thin: each checks it reached the right host and calls the agent's
``BrokerProcesses``. All are idempotent, so reconcile can send them every pass.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task

from controlplane.agent import runtime
from controlplane.agent.processes import NodeSpec


@shared_task(name="agent.ensure_broker", ignore_result=True)
def ensure_broker(spec: dict[str, Any]) -> dict[str, Any]:
    node = NodeSpec(**{**spec, "listen_host": spec.get("listen_host") or runtime.listen_host(),
                       "metadata_url": spec.get("metadata_url") or runtime.control_plane().metadata_url()})
    processes = runtime.processes_for(node.host)
    return asdict(processes.ensure(node))


@shared_task(name="agent.remove_broker", ignore_result=True)
def remove_broker(host: str, cluster: str, node_id: int, purge: bool = True) -> None:
    processes = runtime.processes_for(host)
    processes.remove(cluster, node_id, purge=purge)
    runtime.control_plane().node_report(NodeSpec(cluster, node_id, host, "", "", 0, ""), None)
