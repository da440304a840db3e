-- gatehouse ledger, schema version 20: the settle time an approval binds.
--
-- An attempt may be declared absent only once its lease and its
-- destination's settle time are over. That settle time used to come from
-- the destination the send named (an SMTP target's settle=), so a send
-- naming a shorter one could have reconciliation call a message a relay
-- still held absent, and a retry sent it twice. Now a proposal records the
-- settle time of its endpoint, the approval binds it like the destination,
-- and a send whose destination declares another is refused.
--
-- In nanoseconds; -1 where none was recorded (rows from before this
-- version): such an approval is read as the destination kind's default,
-- or what the send's destination declares when that is longer.
ALTER TABLE actions ADD COLUMN settle BIGINT NOT NULL DEFAULT -1;
ALTER TABLE approvals ADD COLUMN settle BIGINT NOT NULL DEFAULT -1;
ALTER TABLE audience_releases ADD COLUMN settle BIGINT NOT NULL DEFAULT -1;
