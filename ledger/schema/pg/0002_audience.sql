-- gatehouse ledger on PostgreSQL, schema version 2 (see ../0002_audience.sql): file-defined audiences.

-- A mirror of the CRM's customer records that audience files are reconciled
-- against when no other directory is given.
CREATE TABLE customers (
  id          TEXT PRIMARY KEY,
  email       TEXT NOT NULL,
  consent     TEXT NOT NULL DEFAULT '',
  suppressed  BIGINT NOT NULL DEFAULT 0,
  updated_at  BIGINT NOT NULL
);
CREATE INDEX customers_email ON customers(lower(email));

CREATE TABLE audience_releases (
  id             TEXT PRIMARY KEY,
  source_name    TEXT NOT NULL,
  source_digest  TEXT NOT NULL,
  source         BYTEA NOT NULL,
  action_type    TEXT NOT NULL,
  subject        TEXT NOT NULL,
  body           TEXT NOT NULL,
  content_digest TEXT NOT NULL,
  created_by     TEXT NOT NULL,
  created_at     BIGINT NOT NULL,
  approved_by    TEXT NOT NULL DEFAULT '',
  approved_at    BIGINT NOT NULL DEFAULT 0,
  approved_digest TEXT NOT NULL DEFAULT ''
);

-- One row per data row of the source file, with what reconciliation made of it.
CREATE TABLE audience_rows (
  release_id   TEXT NOT NULL REFERENCES audience_releases(id),
  line         BIGINT NOT NULL,
  identity     TEXT NOT NULL,
  customer_id  TEXT NOT NULL DEFAULT '',
  email        TEXT NOT NULL DEFAULT '',
  status       TEXT NOT NULL CHECK (status IN ('error', 'unmatched', 'duplicate', 'excluded', 'removed', 'eligible')),
  reason       TEXT NOT NULL DEFAULT '',
  action_key   TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (release_id, line)
);
CREATE INDEX audience_rows_status ON audience_rows(release_id, status, line);
CREATE INDEX audience_rows_customer ON audience_rows(release_id, customer_id);
