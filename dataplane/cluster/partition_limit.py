"""The cluster's partition limit (the plan's ``max_partitions``), decided where topics are created.

The control plane writes the limit into the cluster's metadata-store row (``MetadataStore.set_partition_limit``);
``MetadataStore.create_topic`` and ``create_partitions`` take that row's lock, count, and ask ``refusal`` before
they write, so every path that adds partitions -- CreateTopics, CreatePartitions (and their validate_only), topic
auto-creation, the control plane's own API -- meets the same limit, and two concurrent creates cannot both fit
into the last free partitions. What counts: every partition of every topic that is not internal (the broker's own
``__consumer_offsets`` is not the tenant's), as the control plane's ``cluster_partition_count`` counts only the
tenant's topics.
"""

from __future__ import annotations


def refusal(*, limit: int | None, used: int, adding: int) -> str | None:
    """Why adding ``adding`` partitions to a cluster holding ``used`` is refused (None: it fits, or no limit)."""
    if limit is None or used + adding <= limit:
        return None
    return (f"The cluster allows {limit} partitions (its plan's max_partitions); {used} are in use, so {adding} "
            f"more do not fit.")
