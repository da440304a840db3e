-- gatehouse ledger, schema version 5: consent as a class, whatever words the
-- CRM wrote it in; lifecycle stages; releases that take implicit consent.

-- The class of each mirrored customer. Values written before classes
-- existed are read as the gate read them then: the words it took as consent
-- are opted in; a suppressed customer is suppressed; the words it took as a
-- refusal are unsubscribed; anything else (an empty value included) is
-- unknown, which is never eligible.
ALTER TABLE customers ADD COLUMN consent_class TEXT NOT NULL DEFAULT 'unknown'
  CHECK (consent_class IN ('opted_in', 'implicit', 'pending', 'unknown', 'unsubscribed', 'suppressed'));
ALTER TABLE customers ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '';
UPDATE customers SET consent_class = CASE
  WHEN suppressed = 1 THEN 'suppressed'
  WHEN lower(trim(consent)) IN ('yes', 'true', '1', 'opt-in', 'opted_in', 'granted') THEN 'opted_in'
  WHEN lower(trim(consent)) IN ('no', 'false', '0', 'unsubscribed', 'withdrawn', 'opted_out', 'opt-out') THEN 'unsubscribed'
  ELSE 'unknown' END;

-- Whether a release takes customers with implicit consent, decided when it
-- is reconciled.
ALTER TABLE audience_releases ADD COLUMN allow_implicit INTEGER NOT NULL DEFAULT 0;

-- Each row's consent class and lifecycle stage at reconciliation. Rows
-- reconciled before keep '' (their eligible recipients were opted in).
ALTER TABLE audience_rows ADD COLUMN consent TEXT NOT NULL DEFAULT '';
ALTER TABLE audience_rows ADD COLUMN lifecycle TEXT NOT NULL DEFAULT '';
