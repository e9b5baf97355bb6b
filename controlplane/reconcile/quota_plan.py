"""What to change so a cluster's client quotas are the control plane's: a pure function.

The control plane's quotas are the truth, as for ACLs: an entity whose keys differ is set (keys it should not
have are removed), an entity in the cluster that no quota names is drift -- removed under the cluster's
``correct`` drift policy, only reported under ``report``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dataplane.security.quotas import Entity

Values = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class QuotaPlan:
    changes: dict[Entity, dict[str, float | None]] = field(default_factory=dict)  # None: remove the key
    drift: tuple[Entity, ...] = ()  # entities left in place (report policy)

    def __bool__(self) -> bool:
        return bool(self.changes)


def plan_quotas(desired: Mapping[Entity, Values], observed: Mapping[Entity, Values], *,
                correct_drift: bool) -> QuotaPlan:
    changes: dict[Entity, dict[str, float | None]] = {}
    for entity, wanted in desired.items():
        present = observed.get(entity, {})
        change: dict[str, float | None] = {k: v for k, v in wanted.items() if present.get(k) != v}
        change.update({k: None for k in present if k not in wanted})
        if change:
            changes[entity] = change
    extra = tuple(sorted(e for e, values in observed.items() if e not in desired and values))
    if correct_drift:
        for entity in extra:
            changes[entity] = dict.fromkeys(observed[entity])
    return QuotaPlan(changes, () if correct_drift else extra)
