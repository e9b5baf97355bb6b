-- Dynamic broker configs (Kafka's DYNAMIC_BROKER_CONFIG and DYNAMIC_DEFAULT_BROKER_CONFIG): settings an operator
-- changes at run time through IncrementalAlterConfigs on a BROKER resource, such as the replication throttle a
-- rebalance sets for its duration. node_id -1 holds the cluster-wide default (resource name "").
CREATE TABLE broker_configs (
    cluster_id  text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    node_id     integer NOT NULL CHECK (node_id >= -1),
    name        text NOT NULL CHECK (name <> ''),
    value       text NOT NULL,
    PRIMARY KEY (cluster_id, node_id, name)
);
