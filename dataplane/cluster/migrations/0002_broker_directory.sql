-- The data directory a broker registered from (its meta.json id): a restart from
-- the same directory replaces a registration whose lease has not lapsed yet (the
-- old process is dead: it held the directory), another directory may not.
ALTER TABLE brokers ADD COLUMN directory_id uuid;
