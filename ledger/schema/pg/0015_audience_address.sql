-- gatehouse ledger, schema version 15 (PostgreSQL): see
-- ../0015_audience_address.sql. PostgreSQL changes the status CHECK in
-- place.
ALTER TABLE audience_releases ADD COLUMN case_sensitive_local_part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE audience_rows DROP CONSTRAINT audience_rows_status_check;
ALTER TABLE audience_rows ADD CONSTRAINT audience_rows_status_check
  CHECK (status IN ('error', 'unmatched', 'duplicate', 'excluded', 'removed', 'missing', 'covered', 'eligible'));
ALTER TABLE audience_rows ADD COLUMN address TEXT NOT NULL DEFAULT '';
ALTER TABLE audience_rows ADD COLUMN carrier_line BIGINT NOT NULL DEFAULT 0;
CREATE INDEX audience_rows_address ON audience_rows(release_id, address, line);
