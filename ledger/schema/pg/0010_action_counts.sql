-- gatehouse ledger, schema version 10 (PostgreSQL): the number of actions in
-- each state, kept as actions are written; an index that pages one state in
-- list order; and, where the server offers pg_trgm, an index for searches.
--
-- The counts: see ../0010_action_counts.sql. Here one trigger per statement
-- adds up the rows the statement wrote (its transition tables), so a bulk
-- insert updates each state's count once rather than once per row.
CREATE TABLE action_counts (
  state  TEXT PRIMARY KEY,
  n      BIGINT NOT NULL
);
INSERT INTO action_counts (state, n) SELECT state, count(*) FROM actions GROUP BY state;

CREATE FUNCTION gatehouse_count_actions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO action_counts (state, n) SELECT state, count(*) FROM new_actions GROUP BY state
      ON CONFLICT (state) DO UPDATE SET n = action_counts.n + EXCLUDED.n;
  ELSIF TG_OP = 'UPDATE' THEN
    INSERT INTO action_counts (state, n)
      SELECT state, sum(d) FROM (
        SELECT state, -1 AS d FROM old_actions UNION ALL SELECT state, 1 FROM new_actions) AS moves
      GROUP BY state HAVING sum(d) <> 0
      ON CONFLICT (state) DO UPDATE SET n = action_counts.n + EXCLUDED.n;
  ELSE
    INSERT INTO action_counts (state, n) SELECT state, -count(*) FROM old_actions GROUP BY state
      ON CONFLICT (state) DO UPDATE SET n = action_counts.n + EXCLUDED.n;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER actions_count_insert AFTER INSERT ON actions REFERENCING NEW TABLE AS new_actions
  FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_count_actions();
CREATE TRIGGER actions_count_update AFTER UPDATE ON actions REFERENCING OLD TABLE AS old_actions NEW TABLE AS new_actions
  FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_count_actions();
CREATE TRIGGER actions_count_delete AFTER DELETE ON actions REFERENCING OLD TABLE AS old_actions
  FOR EACH STATEMENT EXECUTE FUNCTION gatehouse_count_actions();

-- SQLite's index on state holds each entry's rowid in list order; a
-- PostgreSQL btree does not, so a page of one state walked the whole list's
-- order and skipped the other states' rows. With rowid in the index, the
-- entries before a page are skipped in the index alone.
DROP INDEX actions_state;
CREATE INDEX actions_state ON actions(state, rowid);

-- A search looks for a substring of four columns, which a btree cannot
-- serve. A trigram index over them can; pg_trgm ships with PostgreSQL but
-- is an extension a database owner may not be allowed to create. Where it
-- is available (or already created, in any schema) the index is made on the
-- four columns joined by spaces; the search still tests each column, so a
-- match across two columns is not one. Where it is not (or the extension
-- lives in a schema this role may not use), nothing fails and a search
-- reads the table as before.
DO $$
DECLARE
  trgm name;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
     AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
    BEGIN
      CREATE EXTENSION pg_trgm;
    EXCEPTION WHEN OTHERS THEN
      RAISE NOTICE 'pg_trgm not created (%): searches read the table', SQLERRM;
    END;
  END IF;
  SELECT n.nspname INTO trgm FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
  IF trgm IS NOT NULL THEN
    BEGIN
      EXECUTE format('CREATE INDEX actions_search_trgm ON actions USING gin ((key || '' '' || customer || '' '' || recipient || '' '' || subject) %I.gin_trgm_ops)', trgm);
    EXCEPTION WHEN OTHERS THEN
      -- The extension lives in a schema this role may not use.
      RAISE NOTICE 'trigram index not created (%): searches read the table', SQLERRM;
    END;
  END IF;
END $$;
