-- Cluster metadata: what ZooKeeper/KRaft hold for Kafka. One database may hold
-- many clusters; every row is keyed by cluster_id. Tables are unqualified: the
-- runner sets search_path to the dataplane's schema.

CREATE TABLE clusters (
    cluster_id        text PRIMARY KEY CHECK (cluster_id ~ '^[A-Za-z0-9_-]{1,64}$'),
    -- Bumped by every metadata change; brokers compare it after a NOTIFY or a timer.
    metadata_version  bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE brokers (
    cluster_id        text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    node_id           integer NOT NULL CHECK (node_id >= 0),
    host              text NOT NULL,
    port              integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    rack              text,
    -- A new incarnation per process start: a restarted broker is a new registration.
    incarnation       uuid NOT NULL,
    lease_expires_at  timestamptz NOT NULL,
    registered_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, node_id)
);

-- The controller lease; every controller write checks epoch (fencing).
CREATE TABLE controller (
    cluster_id        text PRIMARY KEY REFERENCES clusters ON DELETE CASCADE,
    node_id           integer NOT NULL,
    epoch             bigint NOT NULL CHECK (epoch > 0),
    lease_expires_at  timestamptz NOT NULL
);

-- Cluster-wide defaults for topic configs (Kafka's broker-level log.* settings).
CREATE TABLE cluster_configs (
    cluster_id        text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    name              text NOT NULL,
    value             text NOT NULL,
    PRIMARY KEY (cluster_id, name)
);

CREATE TABLE topics (
    topic_id          uuid PRIMARY KEY,
    cluster_id        text NOT NULL REFERENCES clusters ON DELETE CASCADE,
    name              text NOT NULL CHECK (name ~ '^[a-zA-Z0-9._-]{1,249}$' AND name NOT IN ('.', '..')),
    -- Names equal once '.' reads as '_' collide in metrics; Kafka refuses the second.
    collision_key     text NOT NULL,
    configs           jsonb NOT NULL DEFAULT '{}'::jsonb,
    internal          boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (cluster_id, name),
    UNIQUE (cluster_id, collision_key)
);

CREATE TABLE partitions (
    topic_id          uuid NOT NULL REFERENCES topics ON DELETE CASCADE,
    partition         integer NOT NULL CHECK (partition >= 0),
    replicas          integer[] NOT NULL CHECK (cardinality(replicas) >= 1),
    isr               integer[] NOT NULL,
    leader            integer NOT NULL,          -- -1 when offline
    leader_epoch      integer NOT NULL DEFAULT 0 CHECK (leader_epoch >= 0),
    -- Bumped on every change (leader or ISR): the compare-and-set token for ISR updates.
    partition_epoch   integer NOT NULL DEFAULT 0 CHECK (partition_epoch >= 0),
    PRIMARY KEY (topic_id, partition),
    CHECK (isr <@ replicas),
    CHECK (leader = -1 OR leader = ANY (replicas))
);

-- The idempotent producer's id space, handed out in blocks to brokers.
CREATE TABLE producer_id_blocks (
    cluster_id        text PRIMARY KEY REFERENCES clusters ON DELETE CASCADE,
    next_producer_id  bigint NOT NULL DEFAULT 0 CHECK (next_producer_id >= 0)
);
