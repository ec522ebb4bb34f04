import { IsIn, IsOptional, Matches, ValidateIf } from 'class-validator';
import { IntVar } from './env-parsing';

export const STATE_STORES = ['sqlite', 'postgres'] as const;
export type StateStore = (typeof STATE_STORES)[number];

const postgresOnly = ValidateIf((e: StateEnv) => e.SWITCHYARD_STATE === 'postgres');

/** Where the engine keeps what replicas share; the other variables are read only with SWITCHYARD_STATE=postgres. */
export class StateEnv {
  /**
   * `sqlite` (default): one engine, its state in `<data>/engine.db`. `postgres`: replicas sharing DATABASE_URL —
   * sessions, plans, idempotency keys, tenants' policies and skills, events and the graph's outbox (see docs/SCALING.md);
   * it needs SWITCHYARD_GRAPH=neo4j and SWITCHYARD_SANDBOX_BACKEND=kubernetes.
   */
  @IsOptional()
  @IsIn(STATE_STORES)
  SWITCHYARD_STATE: StateStore = 'sqlite';

  /** `postgres://user:password@host:port/database` (libpq URL; `?sslmode=…` passes through). */
  @postgresOnly
  @Matches(/^postgres(ql)?:\/\/[^\s]+$/, {
    message: 'must be a postgres:// or postgresql:// URL (required with SWITCHYARD_STATE=postgres)',
  })
  DATABASE_URL?: string = undefined;

  /**
   * The URL the other replicas reach this one at, to forward a request for a session this replica serves.
   * Unset: http://<HOST>:<PORT> (with HOST 0.0.0.0 or ::, 127.0.0.1).
   */
  @IsOptional()
  @Matches(/^https?:\/\/[^\s/?#]+\/?$/, { message: 'must be http(s)://host[:port]' })
  SWITCHYARD_REPLICA_URL?: string = undefined;

  /**
   * How long a replica that stops renewing its lease keeps its sessions. After it, another replica takes them over:
   * their running actions end `interrupted` and the replica's pods are deleted. Renewed every third of it.
   */
  @IntVar(1000, 600_000)
  SWITCHYARD_REPLICA_LEASE_MS = 10_000;

  /** Most Postgres connections of this replica. */
  @IntVar(2, 1000)
  SWITCHYARD_DATABASE_POOL = 10;
}

export type StateConfig =
  | { store: 'sqlite' }
  | { store: 'postgres'; databaseUrl: string; replicaUrl: string; leaseMs: number; poolSize: number };

export function stateConfig(env: StateEnv & { HOST: string; PORT: number }): StateConfig {
  if (env.SWITCHYARD_STATE === 'sqlite') return { store: 'sqlite' };
  const host = env.HOST === '0.0.0.0' || env.HOST === '::' ? '127.0.0.1' : env.HOST;
  const replicaUrl = (
    env.SWITCHYARD_REPLICA_URL ?? `http://${host.includes(':') ? `[${host}]` : host}:${env.PORT}`
  ).replace(/\/$/, '');
  return {
    store: 'postgres',
    databaseUrl: env.DATABASE_URL as string,
    replicaUrl,
    leaseMs: env.SWITCHYARD_REPLICA_LEASE_MS,
    poolSize: env.SWITCHYARD_DATABASE_POOL,
  };
}
