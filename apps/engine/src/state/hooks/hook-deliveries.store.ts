import type { HookPhase } from './hook-phase';

export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'dropped'] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One delivery of one action to one hook, as recorded. */
export interface HookDelivery {
  id: string;
  hook: string;
  phase: HookPhase;
  actionId: string;
  sessionId: string;
  tenant: string;
  status: DeliveryStatus;
  attempts: number;
  /** HTTP status of the last attempt that got an answer. */
  lastStatus?: number;
  /** Why the last attempt failed. */
  lastError?: string;
  /** A before-hook's answer: allow or deny. */
  decision?: 'allow' | 'deny';
  createdAt: string;
  updatedAt: string;
  /** When a pending after-hook delivery is tried next. */
  nextAttemptAt?: string;
}

/** A pending after-hook delivery with the body it sends. */
export interface PendingDelivery {
  delivery: HookDelivery;
  payload: string;
}

/**
 * Hook deliveries: every attempt's outcome, and the body of each after-hook delivery still pending, so that what an
 * engine leaves pending (a stop, a crash) is delivered by another. Adapters, chosen by SWITCHYARD_STATE:
 * `SqliteHookDeliveryStore` (engine.db: one engine, which resumes at its next start what it left) and
 * `PostgresHookDeliveryStore` (shared by the replicas: each row is claimed by the replica that delivers it, and a
 * live replica adopts the pending rows of one that died). Listings show every replica's deliveries.
 */
export abstract class HookDeliveryStore {
  /** Records a new delivery, claimed by this engine; `payload` (an after-hook's body) is kept while it is pending. */
  abstract insert(delivery: HookDelivery, payload?: string): Promise<void>;

  /**
   * Records an attempt's outcome; a delivery that ended (not pending) drops its body. False, and nothing written,
   * when the delivery is no longer this engine's (another replica adopted it): this engine stops delivering it.
   */
  abstract update(delivery: HookDelivery): Promise<boolean>;

  /**
   * The pending after-hook deliveries this engine delivers, with their bodies, oldest first: in engine.db all of them
   * (the file is one engine's, whose id changes at each start), in Postgres those this replica claims.
   */
  abstract pending(): Promise<PendingDelivery[]>;

  /**
   * Claims for this engine the pending after-hook deliveries of `replica` (one that died), in one statement: of
   * replicas adopting at once, each delivery goes to exactly one. Answers them oldest first. In engine.db, nothing
   * (there are no other replicas).
   */
  abstract adoptFrom(replica: string): Promise<PendingDelivery[]>;

  /** An action's deliveries, oldest first. */
  abstract forAction(sessionId: string, actionId: string): Promise<HookDelivery[]>;

  /** The latest deliveries, newest first: of one tenant, or of all. */
  abstract recent(limit: number, tenant?: string): Promise<HookDelivery[]>;

  /** Deliveries of each hook by status. */
  abstract counts(): Promise<Map<string, Partial<Record<DeliveryStatus, number>>>>;
}
