/**
 * The event types a session publishes on its stream, listed once: the type follows from it, and the OpenAPI document
 * (the client's types) gets its enum from it.
 */
export const SESSION_EVENT_TYPES = [
  'action.started',
  'action.output',
  'action.completed',
  'action.awaiting_approval',
  'action.approval',
  'plan.started',
  'plan.step.started',
  'plan.step.completed',
  'plan.needs_replan',
  'plan.completed',
  'kernel.started',
  'kernel.ended',
  'process.output',
  'process.exited',
  'checkpoint.created',
  'checkpoint.restored',
  'checkpoint.deleted',
] as const;

/** Event types on a session's stream. */
export type SessionEventType = (typeof SESSION_EVENT_TYPES)[number];

export interface SessionEvent {
  /** Increases by one per event of the session; what `Last-Event-ID` refers to. */
  id: number;
  type: SessionEventType;
  at: string;
  data: Record<string, unknown>;
}
