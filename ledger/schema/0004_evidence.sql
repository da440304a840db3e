-- gatehouse ledger, schema version 4: the gate decides on evidence it
-- recorded itself.
--
-- A proposal names its destination (where the message is handed over,
-- without credentials) and its sender; an approval binds both together with
-- the recipient and the content. An attempt records, in its durable intent,
-- the destination and lookup endpoint it was handed to, the Message-ID it
-- carries and the recipient and sender, so that reconciliation asks only the
-- attempt's own destination about the attempt's own message.
--
-- Rows written before this version have empty values: an approval without a
-- destination is bound to the destination of its first send (the history
-- says so); an attempt without a Message-ID carried its transport id.
ALTER TABLE actions ADD COLUMN destination TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE actions ADD COLUMN recipient_name TEXT NOT NULL DEFAULT '';
-- Where the destination's records are consulted: approved with the
-- destination, since other records could prove a sent message "absent"; a
-- send that names no destination uses it.
ALTER TABLE actions ADD COLUMN lookup TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN destination TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN destination TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN lookup TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN message_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN recipient TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE audience_releases ADD COLUMN destination TEXT NOT NULL DEFAULT '';
ALTER TABLE audience_releases ADD COLUMN sender TEXT NOT NULL DEFAULT '';
ALTER TABLE audience_releases ADD COLUMN lookup TEXT NOT NULL DEFAULT '';
