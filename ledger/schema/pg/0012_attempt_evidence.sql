-- gatehouse ledger, schema version 12 (PostgreSQL): see
-- ../0012_attempt_evidence.sql. The identity is drawn from the server's
-- random(); it names the ledger and need not be secret (every Message-ID
-- carries it), while each attempt's own random part comes from the
-- executor's crypto/rand.
CREATE TABLE ledger_identity (
  id         TEXT PRIMARY KEY,
  created_at BIGINT NOT NULL
);
INSERT INTO ledger_identity (id, created_at)
  VALUES (substr(md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), 1, 16), 0);
ALTER TABLE attempts ADD COLUMN content_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN settles_at BIGINT NOT NULL DEFAULT 0;
-- Late evidence (a report for an attempt already settled) is counted from
-- now on: count the lines written before, so the counters match the history.
INSERT INTO counters (kind, n)
  SELECT 'late_outcome', count(*) FROM events WHERE kind = 'late_outcome' HAVING count(*) > 0;
