-- Client quotas (KIP-546): one row per entity and key. The entity is a JSON object of Kafka's entity types
-- ("user", "client-id", "ip") to a name, JSON null being the type's default entity. quota_version moves with
-- every change (and metadata_version, NOTIFY), so brokers re-read quotas only when they changed.
ALTER TABLE clusters ADD COLUMN quota_version bigint NOT NULL DEFAULT 0;

CREATE TABLE client_quotas (
    cluster_id  text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    entity      jsonb NOT NULL CHECK (jsonb_typeof(entity) = 'object' AND entity <> '{}'::jsonb),
    key         text NOT NULL CHECK (key <> ''),
    value       double precision NOT NULL CHECK (value > 0),
    PRIMARY KEY (cluster_id, entity, key)
);
