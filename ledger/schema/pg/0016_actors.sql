-- gatehouse ledger, schema version 16 (PostgreSQL): see ../0016_actors.sql.
--
-- An actor is a registered caller: a person, a workflow, an agent or a
-- policy, with roles (comma-separated, sorted) and a switch. A ledger is
-- open (any --as is taken, as before this version) until `actors require`
-- makes it registered; from then on every deciding transaction reads the
-- acting actor here and refuses one without the role its verb needs.
CREATE TABLE actors (
  id           TEXT PRIMARY KEY,
  kind         TEXT NOT NULL CHECK (kind IN ('person', 'workflow', 'agent', 'policy')),
  display_name TEXT NOT NULL DEFAULT '',
  roles        TEXT NOT NULL DEFAULT '',
  enabled      BIGINT NOT NULL DEFAULT 1,
  created_by   TEXT NOT NULL DEFAULT '',
  created_at   BIGINT NOT NULL,
  updated_at   BIGINT NOT NULL,
  version      BIGINT NOT NULL DEFAULT 1
);

-- A token is stored only as its SHA-256 (hex) and looked up by it: the
-- ledger can tell whether a presented token is an actor's, never show one.
CREATE TABLE actor_tokens (
  hash       TEXT PRIMARY KEY,
  actor      TEXT NOT NULL REFERENCES actors(id),
  created_by TEXT NOT NULL DEFAULT '',
  created_at BIGINT NOT NULL,
  revoked    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX actor_tokens_actor ON actor_tokens(actor);

-- One row: the ledger's mode, the roles whose acts need a token, and the
-- version of the approval policies (raised by every `policy set`).
CREATE TABLE actor_mode (
  id             BIGINT PRIMARY KEY CHECK (id = 1),
  registered     BIGINT NOT NULL DEFAULT 0,
  token_roles    TEXT NOT NULL DEFAULT '',
  policy_version BIGINT NOT NULL DEFAULT 0,
  version        BIGINT NOT NULL DEFAULT 1
);
INSERT INTO actor_mode (id) VALUES (1);

-- Approval policies per action type: whether a policy actor may approve it,
-- on which material values, and whether two persons are needed (approver
-- not the proposer, executor not the approver). A type with no row needs a
-- person's approval.
CREATE TABLE policies (
  action_type     TEXT PRIMARY KEY,
  policy_approves BIGINT NOT NULL DEFAULT 0,
  requires        TEXT NOT NULL DEFAULT '{}',
  two_person      BIGINT NOT NULL DEFAULT 0,
  version         BIGINT NOT NULL,
  set_by          TEXT NOT NULL DEFAULT '',
  set_at          BIGINT NOT NULL
);

-- The policy version an approval was given under (0: not by a policy).
ALTER TABLE approvals ADD COLUMN policy_version BIGINT NOT NULL DEFAULT 0;
