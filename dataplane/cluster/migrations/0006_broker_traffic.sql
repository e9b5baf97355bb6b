-- Bytes each broker has sent to consumers, per topic, since its process started ({"topic": bytes}), written
-- with every lease renewal. Kafka's protocol carries no traffic counters; the control plane's throughput
-- history reads these (a restart starts a broker's counters again from zero, under a new incarnation).
ALTER TABLE brokers ADD COLUMN bytes_out jsonb NOT NULL DEFAULT '{}';
