-- Security metadata: ACL bindings and SASL credentials, pushed to brokers like the
-- rest (NOTIFY + timer). security_version is bumped with metadata_version by every
-- change here, so a broker re-reads ACLs and credentials only when they changed.
ALTER TABLE clusters ADD COLUMN security_version bigint NOT NULL DEFAULT 0;

-- Kafka's AclBinding; numbers are Kafka's wire codes (ResourceType, PatternType, AclOperation, AclPermissionType).
CREATE TABLE acls (
    cluster_id     text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    resource_type  smallint NOT NULL CHECK (resource_type BETWEEN 2 AND 5),
    pattern_type   smallint NOT NULL CHECK (pattern_type IN (3, 4)),
    resource_name  text NOT NULL CHECK (resource_name <> ''),
    principal      text NOT NULL CHECK (principal ~ '^[A-Za-z][A-Za-z0-9]*:.+$'),
    host           text NOT NULL,
    operation      smallint NOT NULL CHECK (operation BETWEEN 2 AND 12),
    permission     smallint NOT NULL CHECK (permission IN (2, 3)),
    PRIMARY KEY (cluster_id, resource_type, pattern_type, resource_name, principal, host, operation, permission)
);

-- SCRAM (RFC 5802): never the password, only what verification needs.
CREATE TABLE scram_credentials (
    cluster_id     text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    username       text NOT NULL CHECK (username <> ''),
    mechanism      text NOT NULL CHECK (mechanism IN ('SCRAM-SHA-256', 'SCRAM-SHA-512')),
    salt           bytea NOT NULL,
    iterations     integer NOT NULL CHECK (iterations BETWEEN 4096 AND 16384),
    stored_key     bytea NOT NULL,
    server_key     bytea NOT NULL,
    PRIMARY KEY (cluster_id, username, mechanism)
);

-- SASL/PLAIN: the SHA-256 (hex) of the password, as the control plane stores an API key's secret.
CREATE TABLE plain_credentials (
    cluster_id      text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    username        text NOT NULL CHECK (username <> ''),
    password_sha256 text NOT NULL CHECK (password_sha256 ~ '^[0-9a-f]{64}$'),
    PRIMARY KEY (cluster_id, username)
);
