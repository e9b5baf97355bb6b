"""Kubernetes-style status for reconciled objects: ``observed_generation`` and conditions."""

from __future__ import annotations

from typing import Any

from django.utils import timezone


def condition(type_: str, status: bool, reason: str, message: str) -> dict[str, Any]:
    return {"type": type_, "status": "True" if status else "False", "reason": reason, "message": message,
            "last_transition_time": timezone.now().isoformat()}


def pending_status(what: str) -> dict[str, Any]:
    """The status of an object whose spec no reconciler has acted on yet."""
    return {
        "observed_generation": 0,
        "conditions": [
            condition("Ready", False, "AwaitingReconcile", f"The {what} has not been reconciled yet."),
            condition("Reconciling", True, "SpecChanged", f"The {what}'s spec awaits reconciliation."),
        ],
    }


def mark_spec_changed(status: dict[str, Any], what: str) -> dict[str, Any]:
    """Keep observed_generation; flag that a newer spec waits for the reconciler."""
    kept = [c for c in status.get("conditions", []) if c.get("type") != "Reconciling"]
    kept.append(condition("Reconciling", True, "SpecChanged", f"The {what}'s spec changed and awaits reconciliation."))
    return {**status, "conditions": kept}
