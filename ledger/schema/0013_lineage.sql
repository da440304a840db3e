-- gatehouse ledger, schema version 13: lineage. A backup put back is a time
-- machine: the world (the customers' mailboxes, the providers) kept what the
-- ledger sent after the backup was taken, and the restored ledger knows
-- nothing of it. So a ledger counts its generations (a restore starts a new
-- one), a copy made by ledger backup records the point it was taken at (its
-- last history line, and when), and the actions and audience releases a
-- restored ledger holds are unverified until the gate has looked their keys
-- up at their destination: found there, they are held for a person.
ALTER TABLE ledger_identity ADD COLUMN generation BIGINT NOT NULL DEFAULT 1;
-- set on a copy written by ledger backup (0 on a live ledger)
ALTER TABLE ledger_identity ADD COLUMN backup_point BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ledger_identity ADD COLUMN backup_at BIGINT NOT NULL DEFAULT 0;
-- when this ledger was last restored or marked restored (ns; 0: never)
ALTER TABLE ledger_identity ADD COLUMN restored_at BIGINT NOT NULL DEFAULT 0;
CREATE TABLE unverified_actions (
  action_key  TEXT PRIMARY KEY REFERENCES actions(key),
  since       BIGINT NOT NULL,  -- the restore (ns): what it lost may land until since + the settle time
  generation  BIGINT NOT NULL
);
CREATE TABLE unverified_releases (
  release_id  TEXT PRIMARY KEY REFERENCES audience_releases(id),
  since       BIGINT NOT NULL,
  generation  BIGINT NOT NULL
);
