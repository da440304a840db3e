-- gatehouse ledger, schema version 15: one notice per address, and customers
-- missing from the latest CRM export.
--
-- Customers of one release who share an address (Ada@Example.org and
-- ada@example.org under two ids) receive one notice: the first eligible one
-- in source order carries it, the others are 'covered' by it (carrier_line
-- names its row). A customer absent from a fresh export given to a send is
-- 'missing', never eligible. Rows keep the address they were compared by;
-- rows reconciled before keep '' (one notice per customer, as they were
-- reconciled). A release records whether the local parts of its addresses
-- were compared case-sensitively (0: folded, as they are by default).
--
-- SQLite cannot change a CHECK constraint in place: the rows table is
-- rebuilt with the two new statuses, its rows copied as they are.
ALTER TABLE audience_releases ADD COLUMN case_sensitive_local_part INTEGER NOT NULL DEFAULT 0;

CREATE TABLE audience_rows_13 (
  release_id   TEXT NOT NULL REFERENCES audience_releases(id),
  line         INTEGER NOT NULL,
  identity     TEXT NOT NULL,
  customer_id  TEXT NOT NULL DEFAULT '',
  email        TEXT NOT NULL DEFAULT '',
  status       TEXT NOT NULL CHECK (status IN ('error', 'unmatched', 'duplicate', 'excluded', 'removed', 'missing', 'covered', 'eligible')),
  reason       TEXT NOT NULL DEFAULT '',
  action_key   TEXT NOT NULL DEFAULT '',
  consent      TEXT NOT NULL DEFAULT '',
  lifecycle    TEXT NOT NULL DEFAULT '',
  address      TEXT NOT NULL DEFAULT '',
  carrier_line INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (release_id, line)
);
INSERT INTO audience_rows_13 (release_id, line, identity, customer_id, email, status, reason, action_key, consent, lifecycle)
  SELECT release_id, line, identity, customer_id, email, status, reason, action_key, consent, lifecycle FROM audience_rows;
DROP TABLE audience_rows;
ALTER TABLE audience_rows_13 RENAME TO audience_rows;
CREATE INDEX audience_rows_status ON audience_rows(release_id, status, line);
CREATE INDEX audience_rows_customer ON audience_rows(release_id, customer_id);
CREATE INDEX audience_rows_address ON audience_rows(release_id, address, line);
