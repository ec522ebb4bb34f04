/** One step of the shared Postgres schema; applied once, in order, by `PostgresDb.open`. Never edit a released one. */
export interface StateMigration {
  version: number;
  name: string;
  sql: string;
}

/** The replicas' shared schema (SWITCHYARD_STATE=postgres). Append; never reorder or change what is released. */
export const STATE_MIGRATIONS: readonly StateMigration[] = [
  {
    version: 1,
    name: 'replicas, sessions and their events',
    sql: `
      CREATE TABLE replicas (
        id text PRIMARY KEY,
        url text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        lease_until timestamptz NOT NULL,
        stopped_at timestamptz,
        taken_over_by text,
        taken_over_at timestamptz,
        interrupted integer NOT NULL DEFAULT 0
      );
      CREATE TABLE sessions (
        id text PRIMARY KEY,
        tenant text NOT NULL,
        created_at timestamptz NOT NULL,
        last_active_at timestamptz NOT NULL,
        ttl_seconds integer NOT NULL,
        metadata jsonb NOT NULL,
        max_concurrent_actions integer NOT NULL,
        options jsonb NOT NULL,
        owner text NOT NULL
      );
      CREATE INDEX sessions_tenant ON sessions (tenant, created_at, id);
      CREATE INDEX sessions_owner ON sessions (owner);
      CREATE TABLE session_events (
        session_id text NOT NULL,
        id bigint NOT NULL,
        type text NOT NULL,
        at text NOT NULL,
        data jsonb NOT NULL,
        PRIMARY KEY (session_id, id)
      );`,
  },
  {
    version: 2,
    name: "plans, idempotency keys, tenants' policies and skills",
    // json, not jsonb: documents go back out as they came in (key order, so a replay is the first answer), nothing
    // queries inside them, and jsonb refuses the \u0000 an action's output may hold.
    sql: `
      CREATE TABLE plans (
        id text PRIMARY KEY,
        seq bigint GENERATED ALWAYS AS IDENTITY,
        session_id text NOT NULL,
        status text NOT NULL,
        doc json NOT NULL
      );
      CREATE INDEX plans_session ON plans (session_id, seq);
      CREATE INDEX plans_running ON plans (session_id) WHERE status = 'running';
      CREATE TABLE idempotency_keys (
        tenant text NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,
        status text NOT NULL CHECK (status IN ('running', 'done')),
        status_code integer,
        body json,
        created_at bigint NOT NULL,
        claimed_by text,
        claim_token text,
        claimed_at bigint,
        PRIMARY KEY (tenant, key)
      );
      CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
      CREATE TABLE tenant_policies (
        tenant text PRIMARY KEY,
        rules json NOT NULL,
        updated_at timestamptz NOT NULL,
        updated_by text NOT NULL
      );
      CREATE TABLE tenant_skills (
        tenant text NOT NULL,
        name text NOT NULL,
        definition json NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (tenant, name)
      );`,
  },
  {
    version: 3,
    name: 'hook deliveries',
    // Times stay the ISO text the engine wrote (as in engine.db); "C" collation so ordering is by code point there.
    // claimed_by: the replica that delivers a pending row (who enqueued it, or who adopted it when that one died).
    sql: `
      CREATE TABLE hook_deliveries (
        id text COLLATE "C" PRIMARY KEY,
        hook text NOT NULL,
        phase text NOT NULL,
        action_id text NOT NULL,
        session_id text NOT NULL,
        tenant text NOT NULL,
        status text NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        last_status integer,
        last_error text,
        decision text,
        created_at text COLLATE "C" NOT NULL,
        updated_at text NOT NULL,
        next_attempt_at text,
        payload text,
        claimed_by text NOT NULL,
        seq bigserial NOT NULL
      );
      CREATE INDEX hook_deliveries_action ON hook_deliveries (session_id, action_id);
      CREATE INDEX hook_deliveries_recent ON hook_deliveries (created_at, id);
      CREATE INDEX hook_deliveries_tenant ON hook_deliveries (tenant, created_at, id);
      CREATE INDEX hook_deliveries_pending ON hook_deliveries (claimed_by, created_at, seq)
        WHERE status = 'pending' AND payload IS NOT NULL;`,
  },
  {
    version: 4,
    name: 'checkpoints of pod workspaces',
    // A tar in rows of at most 8 MiB (CHECKPOINT_CHUNK_BYTES): a workspace may reach a GiB, a bytea value must stay
    // well below 1 GB. The record is json, as it came in; "C" collation so a list is ordered by code point.
    sql: `
      CREATE TABLE checkpoints (
        session_id text NOT NULL,
        id text COLLATE "C" NOT NULL,
        created_at text COLLATE "C" NOT NULL,
        record json NOT NULL,
        tar_bytes bigint NOT NULL,
        chunks integer NOT NULL,
        PRIMARY KEY (session_id, id)
      );
      CREATE TABLE checkpoint_chunks (
        session_id text NOT NULL,
        checkpoint_id text COLLATE "C" NOT NULL,
        n integer NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (session_id, checkpoint_id, n),
        FOREIGN KEY (session_id, checkpoint_id) REFERENCES checkpoints (session_id, id) ON DELETE CASCADE
      );`,
  },
  {
    version: 5,
    name: "plans' step actions apart from their documents",
    // A plan is saved at every step transition; its actions (up to megabytes of code each) are written once, here.
    // json, as the documents: an action goes back out as it came in.
    sql: `
      CREATE TABLE plan_actions (
        plan_id text NOT NULL,
        key text NOT NULL,
        action json NOT NULL,
        PRIMARY KEY (plan_id, key)
      );`,
  },
];
