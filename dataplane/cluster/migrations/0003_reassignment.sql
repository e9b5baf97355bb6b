-- Partition reassignment in progress (AlterPartitionReassignments): replicas holds
-- the union of old and new; these say which are joining and which will leave once
-- every joining replica is in the ISR. Both empty when nothing is moving.
ALTER TABLE partitions
    ADD COLUMN adding_replicas   integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN removing_replicas integer[] NOT NULL DEFAULT '{}';
