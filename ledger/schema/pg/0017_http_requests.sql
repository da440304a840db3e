-- gatehouse ledger, schema version 17 (PostgreSQL): see
-- ../0017_http_requests.sql. The key secret comes from gen_random_uuid(),
-- which draws from the server's strong random source (PostgreSQL 13 and
-- later): two of them, 244 random bits.
ALTER TABLE actions ADD COLUMN request TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN wire TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN provider_key TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN key_generation BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN http_status BIGINT NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN destination_action_id TEXT NOT NULL DEFAULT '';
ALTER TABLE ledger_identity ADD COLUMN key_secret TEXT NOT NULL DEFAULT '';
UPDATE ledger_identity SET key_secret = replace(gen_random_uuid()::text, '-', '') || replace(gen_random_uuid()::text, '-', '');
