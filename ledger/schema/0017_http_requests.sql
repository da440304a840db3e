-- gatehouse ledger, schema version 17: actions that are HTTP requests.
--
-- An action's request is its canonical JSON (method, path, the headers
-- that carry meaning, body), bound by the approval digest; '' for a
-- message. An attempt of one records the exact bytes it hands over (wire),
-- the provider-facing key they carry and its key generation, the HTTP
-- status the provider answered (0 for none) and the provider's id of what
-- the write created (the destination action id).
--
-- The provider-facing key is an HMAC of the action key and the generation
-- under key_secret, drawn once here: a key nobody can compute from the
-- action key alone, so nobody else can replay or pre-empt it.
ALTER TABLE actions ADD COLUMN request TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN wire TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN provider_key TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN key_generation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN http_status INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN destination_action_id TEXT NOT NULL DEFAULT '';
ALTER TABLE ledger_identity ADD COLUMN key_secret TEXT NOT NULL DEFAULT '';
UPDATE ledger_identity SET key_secret = lower(hex(randomblob(32)));
