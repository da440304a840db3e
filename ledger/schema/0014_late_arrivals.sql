-- gatehouse ledger, schema version 14: messages that arrived after their
-- attempt was settled as not arrived.
--
-- An attempt settled as not delivered (by the destination's answer, or by
-- reconciliation after its settle time) can still turn out to have arrived:
-- a late 250, or its message found in the destination's records later (a
-- process that stood still inside the write of the final "." and finished
-- it after its deadline). arrived_late is the moment (ns) the gate learned
-- that, 0 while it has not; it is set once per attempt, so the evidence is
-- recorded once however often the records are read again. late_arrivals
-- counts such attempts per action, on the row every decision reads anyway:
-- an action whose message is known to have arrived is never attempted
-- again, and one that also has an accepted attempt arrived twice. The
-- partial index holds only those actions: metrics count them without a
-- scan, and no other write touches it.
--
-- Before this version a late 250 was a late_outcome line only; those lines
-- are the evidence, so the attempts they name are marked from them.
ALTER TABLE attempts ADD COLUMN arrived_late BIGINT NOT NULL DEFAULT 0;
ALTER TABLE actions ADD COLUMN late_arrivals INTEGER NOT NULL DEFAULT 0;
CREATE INDEX actions_late_arrivals ON actions(late_arrivals) WHERE late_arrivals > 0;
UPDATE attempts SET arrived_late = (
  SELECT min(e.at) FROM events e
  WHERE e.kind = 'late_outcome' AND e.action_key = attempts.action_key
    AND e.message LIKE ('Attempt ' || attempts.number || ' of %')
    AND e.message LIKE '% was confirmed accepted after %')
WHERE outcome NOT IN ('', 'accepted', 'unknown') AND id IN (
  SELECT t.id FROM events e JOIN attempts t ON t.action_key = e.action_key
  WHERE e.kind = 'late_outcome'
    AND e.message LIKE ('Attempt ' || t.number || ' of %')
    AND e.message LIKE '% was confirmed accepted after %');
UPDATE actions SET late_arrivals = (
  SELECT count(*) FROM attempts t WHERE t.action_key = actions.key AND t.arrived_late != 0)
WHERE key IN (SELECT action_key FROM attempts WHERE arrived_late != 0);
