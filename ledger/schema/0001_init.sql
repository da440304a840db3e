-- gatehouse ledger, schema version 1.
-- Times are Unix nanoseconds (UTC). Every deciding write runs in one
-- BEGIN IMMEDIATE transaction and bumps the row's version column.

CREATE TABLE tasks (
  id          TEXT PRIMARY KEY,
  customer    TEXT NOT NULL DEFAULT '',
  subject     TEXT NOT NULL DEFAULT '',
  status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'completed')),
  owner       TEXT NOT NULL DEFAULT '',
  version     INTEGER NOT NULL DEFAULT 1,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
CREATE INDEX tasks_owner ON tasks(owner);

CREATE TABLE presence (
  task_id     TEXT NOT NULL REFERENCES tasks(id),
  actor       TEXT NOT NULL,
  kind        TEXT NOT NULL,
  since       INTEGER NOT NULL,
  expires_at  INTEGER NOT NULL,
  PRIMARY KEY (task_id, actor)
);

CREATE TABLE actions (
  key          TEXT PRIMARY KEY,
  task_id      TEXT NOT NULL REFERENCES tasks(id),
  customer     TEXT NOT NULL,
  event        TEXT NOT NULL,
  action_type  TEXT NOT NULL,
  target       TEXT NOT NULL,
  revision     INTEGER NOT NULL,
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
  version      INTEGER NOT NULL DEFAULT 1,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL
);
CREATE INDEX actions_state ON actions(state, updated_at);
CREATE INDEX actions_task ON actions(task_id);
CREATE INDEX actions_customer ON actions(customer);
CREATE INDEX actions_updated ON actions(updated_at);

CREATE TABLE approvals (
  id           INTEGER PRIMARY KEY,
  action_key   TEXT NOT NULL REFERENCES actions(key),
  approver     TEXT NOT NULL,
  digest       TEXT NOT NULL,
  recipient    TEXT NOT NULL,
  target       TEXT NOT NULL,
  owner        TEXT NOT NULL,
  material     TEXT NOT NULL, -- JSON array of MaterialRead
  at           INTEGER NOT NULL,
  valid        INTEGER NOT NULL DEFAULT 1,
  invalidated  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX approvals_action ON approvals(action_key, id);

CREATE TABLE attempts (
  id            INTEGER PRIMARY KEY,
  action_key    TEXT NOT NULL REFERENCES actions(key),
  number        INTEGER NOT NULL,
  transport_id  TEXT NOT NULL UNIQUE,
  executor      TEXT NOT NULL,
  holder        TEXT NOT NULL,
  started_at    INTEGER NOT NULL,
  lease_until   INTEGER NOT NULL,
  outcome       TEXT NOT NULL DEFAULT '',
  outcome_at    INTEGER NOT NULL DEFAULT 0,
  response      TEXT NOT NULL DEFAULT '',
  reconciled    INTEGER NOT NULL DEFAULT 0,
  UNIQUE (action_key, number)
);
-- Invariant 1, enforced by the schema itself: at most one attempt per action
-- without an outcome.
CREATE UNIQUE INDEX attempts_one_in_flight ON attempts(action_key) WHERE outcome = '';
CREATE INDEX attempts_outcome ON attempts(outcome);

CREATE TABLE material_checks (
  id           INTEGER PRIMARY KEY,
  action_key   TEXT NOT NULL REFERENCES actions(key),
  attempt      INTEGER NOT NULL,
  at           INTEGER NOT NULL,
  source       TEXT NOT NULL,
  field        TEXT NOT NULL,
  approved     TEXT NOT NULL,
  read_value   TEXT NOT NULL,
  matched      INTEGER NOT NULL,
  unavailable  INTEGER NOT NULL
);
CREATE INDEX material_checks_action ON material_checks(action_key, id);

CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  at          INTEGER NOT NULL,
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
  id         INTEGER PRIMARY KEY,
  recipient  TEXT NOT NULL,
  task_id    TEXT NOT NULL,
  at         INTEGER NOT NULL,
  message    TEXT NOT NULL
);
CREATE INDEX notifications_recipient ON notifications(recipient, id);

CREATE TABLE stop_switch (
  id       INTEGER PRIMARY KEY CHECK (id = 1),
  stopped  INTEGER NOT NULL DEFAULT 0,
  actor    TEXT NOT NULL DEFAULT '',
  reason   TEXT NOT NULL DEFAULT '',
  at       INTEGER NOT NULL DEFAULT 0,
  version  INTEGER NOT NULL DEFAULT 1
);
INSERT INTO stop_switch (id) VALUES (1);
