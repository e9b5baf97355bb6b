-- Security events brokers report for the control plane's audit trail: SASL authentication failures and
-- ACL denials, counted per (kind, principal, detail, host) on each broker and written in bounded batches
-- (at most a few hundred rows per broker per flush). The control plane takes them (DELETE ... RETURNING)
-- into its rate-limited audit trail, so this table holds only what has not been ingested yet.
CREATE TABLE security_events (
    id          bigserial PRIMARY KEY,
    cluster_id  text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    broker_id   integer NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('sasl_failed', 'acl_denied')),
    principal   text NOT NULL,          -- "User:alice"; for a failed login the name it tried, or "unknown"
    detail      text NOT NULL,          -- sasl_failed: the mechanism; acl_denied: "WRITE TOPIC orders"
    host        text NOT NULL,
    count       integer NOT NULL CHECK (count > 0),
    first_at    timestamptz NOT NULL,
    last_at     timestamptz NOT NULL
);
CREATE INDEX security_events_by_cluster ON security_events (cluster_id, id);
