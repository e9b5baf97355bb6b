-- The plan's partition limit, written by the control plane; NULL: no limit. Checked by topic and partition
-- creation under the cluster row's lock (dataplane.cluster.partition_limit).
ALTER TABLE clusters ADD COLUMN max_partitions integer CHECK (max_partitions IS NULL OR max_partitions > 0);
