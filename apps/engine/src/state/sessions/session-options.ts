import type { Session } from './session.model';

/** What a session chose at creation, beyond its columns: stored as one JSON document by every session store. */
export interface SessionOptionsDoc {
  network?: { allow?: string[] };
  template?: unknown;
  forkedFrom?: { sessionId?: unknown; checkpointId?: unknown };
  policy?: Session['policy'];
}

/** The document a session's options are stored as. */
export function sessionOptions(s: Session): SessionOptionsDoc {
  return {
    network: s.network,
    ...(s.template !== undefined && { template: s.template }),
    ...(s.forkedFrom !== undefined && { forkedFrom: s.forkedFrom }),
    ...(s.policy !== undefined && { policy: s.policy }),
  };
}

/** The session's fields its options document holds (template, fork origin, policy layer, network). */
export function fromSessionOptions(
  doc: SessionOptionsDoc,
): Pick<Session, 'network' | 'template' | 'forkedFrom' | 'policy'> {
  const from = doc.forkedFrom;
  return {
    ...(typeof doc.template === 'string' && { template: doc.template }),
    ...(typeof from?.sessionId === 'string' && {
      forkedFrom: {
        sessionId: from.sessionId,
        ...(typeof from.checkpointId === 'string' && { checkpointId: from.checkpointId }),
      },
    }),
    ...(Array.isArray(doc.policy?.rules) && { policy: { rules: doc.policy.rules } }),
    network: { allow: doc.network?.allow ?? [] },
  };
}
