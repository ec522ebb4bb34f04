/** Event types on a session's stream. */
export type SessionEventType =
  | 'action.started'
  | 'action.output'
  | 'action.completed'
  | 'action.awaiting_approval'
  | 'action.approval'
  | 'plan.started'
  | 'plan.step.started'
  | 'plan.step.completed'
  | 'plan.needs_replan'
  | 'plan.completed'
  | 'kernel.started'
  | 'kernel.ended'
  | 'process.output'
  | 'process.exited'
  | 'checkpoint.created'
  | 'checkpoint.restored'
  | 'checkpoint.deleted';

export interface SessionEvent {
  /** Increases by one per event of the session; what `Last-Event-ID` refers to. */
  id: number;
  type: SessionEventType;
  at: string;
  data: Record<string, unknown>;
}
