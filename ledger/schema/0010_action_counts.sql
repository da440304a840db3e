-- gatehouse ledger, schema version 10: the number of actions in each state,
-- kept as actions are written.
--
-- The inspector shows the total under every page (all actions, one state,
-- the holds). Counting them per page read every index entry: on PostgreSQL,
-- whose count(*) has no shortcut, that was most of a page's cost at 100,000
-- actions. Triggers keep these counts in the transaction that inserts an
-- action or changes its state, whatever statement does it, so they cannot
-- drift from the table; `gatehouse ledger check` recounts them.
CREATE TABLE action_counts (
  state  TEXT PRIMARY KEY,
  n      BIGINT NOT NULL
);
INSERT INTO action_counts (state, n) SELECT state, count(*) FROM actions GROUP BY state;

CREATE TRIGGER actions_count_insert AFTER INSERT ON actions BEGIN
  INSERT INTO action_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT(state) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER actions_count_state AFTER UPDATE OF state ON actions WHEN OLD.state <> NEW.state BEGIN
  UPDATE action_counts SET n = n - 1 WHERE state = OLD.state;
  INSERT INTO action_counts (state, n) VALUES (NEW.state, 1)
    ON CONFLICT(state) DO UPDATE SET n = n + 1;
END;

-- Actions are never deleted; should one be, it leaves its count.
CREATE TRIGGER actions_count_delete AFTER DELETE ON actions BEGIN
  UPDATE action_counts SET n = n - 1 WHERE state = OLD.state;
END;
