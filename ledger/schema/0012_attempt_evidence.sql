-- gatehouse ledger, schema version 12: what an attempt's message can be
-- told apart by, and when its absence may be concluded.
--
-- A Message-ID computed from the action key could be computed by anyone who
-- saw a message (the key is in its header), and two copies of one ledger
-- computed the same ones. Attempts now draw a random part for their
-- Message-ID, recorded in the intent as before, and the Message-ID names the
-- ledger that made it: ledger_identity holds that name, drawn once here.
-- The intent also records the digest of the content handed over, so
-- reconciliation counts a stored message as the attempt's only when the
-- content matches too, and settles_at: the moment (ns) before which finding
-- nothing proves nothing, because a relay may still be holding the message
-- (the lease's end plus the destination's settle time). 0 on attempts
-- recorded before: their lease's end plus the default settle time applies.
-- And late evidence is counted from now on.
CREATE TABLE ledger_identity (
  id         TEXT PRIMARY KEY,
  created_at BIGINT NOT NULL
);
INSERT INTO ledger_identity (id, created_at) VALUES (lower(hex(randomblob(8))), 0);
ALTER TABLE attempts ADD COLUMN content_digest TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN settles_at BIGINT NOT NULL DEFAULT 0;
-- Late evidence (a report for an attempt already settled) is counted from
-- now on: count the lines written before, so the counters match the history.
INSERT INTO counters (kind, n)
  SELECT 'late_outcome', count(*) FROM events WHERE kind = 'late_outcome' HAVING count(*) > 0;
