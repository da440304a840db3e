-- gatehouse ledger, schema version 18: a rehearsal's ledger says so.
--
-- A rehearsal runs on a pretend clock, and the workflows it runs read that
-- clock from their environment; a production ledger must never follow
-- one, whoever serves it. So the ledger a rehearsal creates records, here,
-- the scenario it belongs to; '' is every other ledger. Only a ledger that
-- holds no history yet can be marked, and nothing unmarks one.
ALTER TABLE ledger_identity ADD COLUMN rehearsal TEXT NOT NULL DEFAULT '';
