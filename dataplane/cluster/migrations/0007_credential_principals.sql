-- A credential may authenticate as a principal other than User:<username>: an API key (username = key id)
-- acts as its owner (User:sa-<uuid> or User:u-<id>), so ACLs bound to the owner apply to every key it has.
-- NULL keeps Kafka's rule, User:<username> (credentials made through AlterUserScramCredentials, brokers).
ALTER TABLE plain_credentials ADD COLUMN principal text
    CHECK (principal IS NULL OR principal ~ '^[A-Za-z][A-Za-z0-9]*:.+$');
ALTER TABLE scram_credentials ADD COLUMN principal text
    CHECK (principal IS NULL OR principal ~ '^[A-Za-z][A-Za-z0-9]*:.+$');
