import { Injectable, Logger } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { ReplicaLeases } from '../../engine/replicas/replica-leases';
import { FORWARDED_BY, unavailable } from './session-forwarding';

interface Pending {
  actionId: string;
  requestedAt: string;
}

/**
 * `GET /v1/approvals` with replicas: an action waits for its decision on the replica that serves its session, so the
 * list is every live replica's, asked in parallel with the caller's own credentials (each answers only its own: the
 * request is marked forwarded), merged oldest first. A replica that does not answer in time is left out and named in
 * the log; the deciding itself (`…/approve`, `…/reject`) is forwarded like any session request.
 */
@Injectable()
export class ApprovalsFanOut {
  private readonly logger = new Logger('ApprovalsFanOut');

  constructor(private readonly leases: ReplicaLeases) {}

  middleware(): (req: Request, res: Response, next: NextFunction) => void {
    return (req, res, next) => {
      if (req.method !== 'GET' || req.path !== '/v1/approvals' || req.headers[FORWARDED_BY] !== undefined) {
        return next();
      }
      this.gather(req, res).catch((err: unknown) => {
        this.logger.error({ msg: 'cannot gather the replicas’ approvals', err: String(err) });
        if (!res.headersSent)
          unavailable(res, 'REPLICA_STATE_UNAVAILABLE', 'the replicas cannot be listed', 1);
      });
    };
  }

  private async gather(req: Request, res: Response): Promise<void> {
    const replicas = await this.leases.live();
    const headers: Record<string, string> = { [FORWARDED_BY]: this.leases.replicaId };
    if (typeof req.headers.authorization === 'string') headers.authorization = req.headers.authorization;
    const answers = await Promise.all(
      replicas.map(async (r) => {
        try {
          const answer = await fetch(new URL(req.originalUrl, r.url), {
            headers,
            signal: AbortSignal.timeout(5000),
          });
          return { replica: r.id, status: answer.status, body: await answer.json() };
        } catch (err) {
          this.logger.warn({ msg: 'a replica did not list its approvals', replica: r.id, err: String(err) });
          return undefined;
        }
      }),
    );
    const answered = answers.filter((a) => a !== undefined);
    // Refused (no key, a bad key): every replica refuses alike; pass the first refusal on.
    const refusal = answered.find((a) => a.status !== 200);
    if (refusal) {
      res.status(refusal.status).json(refusal.body);
      return;
    }
    const approvals = answered
      .flatMap((a) => (a.body as { approvals: Pending[] }).approvals)
      .sort((x, y) => x.requestedAt.localeCompare(y.requestedAt) || x.actionId.localeCompare(y.actionId));
    res.status(200).json({ approvals });
  }
}
