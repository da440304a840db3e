-- gatehouse ledger, schema version 6: a history a review can fold.
--
-- The state of the ledger at any past moment is a fold over its history, so
-- every history line now carries what the fold needs:
--   to_state  the state the action moved to with this line ('' when the line
--             changed no state), written as 'held:<cause>' for a hold so the
--             fold knows an open outcome from a queued send;
--   detail    JSON with the facts a reviewer needs that the sentence only
--             names: the material values and destination an approval bound,
--             the destination and Message-ID of an attempt, who established
--             an outcome ('' when the line has none).
ALTER TABLE events ADD COLUMN to_state TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN detail TEXT NOT NULL DEFAULT '';

-- Lines before folded_from were written without to_state and detail: a
-- review infers their states from their kinds and says it did.
CREATE TABLE history_format (
  id           INTEGER PRIMARY KEY CHECK (id = 1),
  folded_from  BIGINT NOT NULL -- an event id: 64-bit on PostgreSQL too
);
INSERT INTO history_format (id, folded_from) SELECT 1, COALESCE(max(id), 0) + 1 FROM events;

-- Manual overrides are counted like the refusals: a release of a hold, a
-- destination a person said moved, an outcome a person established by hand.
INSERT INTO counters (kind, n)
  SELECT kind, count(*) FROM events WHERE kind IN ('hold_released', 'destination_moved') GROUP BY kind;
INSERT INTO counters (kind, n)
  SELECT 'resolved_by_person', count(*) FROM events
  WHERE kind = 'reconciled' AND message LIKE '%checked the destination by hand%'
  HAVING count(*) > 0;
