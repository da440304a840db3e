-- gatehouse ledger on PostgreSQL, schema version 1 (see ../0001_init.sql;
-- times are BIGINT, ids BIGSERIAL, and tasks and actions carry the rowid the
-- SQLite store has implicitly).
-- Times are Unix nanoseconds (UTC). Every deciding write runs in one
-- BEGIN IMMEDIATE transaction and bumps the row's version column.

CREATE TABLE tasks (
  rowid       BIGSERIAL UNIQUE,
  id          TEXT PRIMARY KEY,
  customer    TEXT NOT NULL DEFAULT '',
  subject     TEXT NOT NULL DEFAULT '',
  status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed')),
  owner       TEXT NOT NULL DEFAULT '',
  version     BIGINT NOT NULL DEFAULT 1,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);
CREATE INDEX tasks_owner ON tasks(owner);

CREATE TABLE presence (
  task_id     TEXT NOT NULL REFERENCES tasks(id),
  actor       TEXT NOT NULL,
  kind        TEXT NOT NULL,
  since       BIGINT NOT NULL,
  expires_at  BIGINT NOT NULL,
  PRIMARY KEY (task_id, actor)
);

CREATE TABLE actions (
  rowid        BIGSERIAL UNIQUE,
  key          TEXT PRIMARY KEY,
  task_id      TEXT NOT NULL REFERENCES tasks(id),
  customer     TEXT NOT NULL,
  event        TEXT NOT NULL,
  action_type  TEXT NOT NULL,
  target       TEXT NOT NULL,
  revision     BIGINT NOT NULL,
  recipient    TEXT NOT NULL,
  subject      TEXT NOT NULL,
  body         TEXT NOT NULL,
  digest       TEXT NOT NULL,
  state        TEXT NOT NULL,
  reason       TEXT NOT NULL DEFAULT '',
  hold_cause   TEXT NOT NULL DEFAULT '',
  held_from    TEXT NOT NULL DEFAULT '',
  proposed_by  TEXT NOT NULL,
  corrects     TEXT REFERENCES actions(key),
  version      BIGINT NOT NULL DEFAULT 1,
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL
);
CREATE INDEX actions_state ON actions(state, updated_at);
CREATE INDEX actions_task ON actions(task_id);
CREATE INDEX actions_customer ON actions(customer);
CREATE INDEX actions_updated ON actions(updated_at);

CREATE TABLE approvals (
  id           BIGSERIAL PRIMARY KEY,
  action_key   TEXT NOT NULL REFERENCES actions(key),
  approver     TEXT NOT NULL,
  digest       TEXT NOT NULL,
  recipient    TEXT NOT NULL,
  target       TEXT NOT NULL,
  owner        TEXT NOT NULL,
  material     TEXT NOT NULL, -- JSON array of MaterialRead
  at           BIGINT NOT NULL,
  valid        BIGINT NOT NULL DEFAULT 1,
  invalidated  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_action ON approvals(action_key, id);

CREATE TABLE attempts (
  id            BIGSERIAL PRIMARY KEY,
  action_key    TEXT NOT NULL REFERENCES actions(key),
  number        BIGINT NOT NULL,
  transport_id  TEXT NOT NULL UNIQUE,
  executor      TEXT NOT NULL,
  holder        TEXT NOT NULL,
  started_at    BIGINT NOT NULL,
  lease_until   BIGINT NOT NULL,
  outcome       TEXT NOT NULL DEFAULT '',
  outcome_at    BIGINT NOT NULL DEFAULT 0,
  response      TEXT NOT NULL DEFAULT '',
  reconciled    BIGINT NOT NULL DEFAULT 0,
  UNIQUE (action_key, number)
);
-- Invariant 1, enforced by the schema itself: at most one attempt per action
-- without an outcome.
CREATE UNIQUE INDEX attempts_one_in_flight ON attempts(action_key) WHERE outcome = '';
CREATE INDEX attempts_outcome ON attempts(outcome);

CREATE TABLE material_checks (
  id           BIGSERIAL PRIMARY KEY,
  action_key   TEXT NOT NULL REFERENCES actions(key),
  attempt      BIGINT NOT NULL,
  at           BIGINT NOT NULL,
  source       TEXT NOT NULL,
  field        TEXT NOT NULL,
  approved     TEXT NOT NULL,
  read_value   TEXT NOT NULL,
  matched      BIGINT NOT NULL,
  unavailable  BIGINT NOT NULL
);
CREATE INDEX material_checks_action ON material_checks(action_key, id);

CREATE TABLE events (
  id          BIGSERIAL PRIMARY KEY,
  at          BIGINT NOT NULL,
  actor       TEXT NOT NULL,
  task_id     TEXT NOT NULL DEFAULT '',
  action_key  TEXT NOT NULL DEFAULT '',
  kind        TEXT NOT NULL,
  message     TEXT NOT NULL,
  reason      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_action ON events(action_key, id);
CREATE INDEX events_task ON events(task_id, id);
CREATE INDEX events_kind ON events(kind);

CREATE TABLE notifications (
  id         BIGSERIAL PRIMARY KEY,
  recipient  TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  at         BIGINT NOT NULL,
  message    TEXT NOT NULL
);
CREATE INDEX notifications_recipient ON notifications(recipient, id);

CREATE TABLE stop_switch (
  id       BIGSERIAL PRIMARY KEY CHECK (id = 1),
  stopped  BIGINT NOT NULL DEFAULT 0,
  actor    TEXT NOT NULL DEFAULT '',
  reason   TEXT NOT NULL DEFAULT '',
  at       BIGINT NOT NULL DEFAULT 0,
  version  BIGINT NOT NULL DEFAULT 1
);
INSERT INTO stop_switch (id) VALUES (1);
