import { Injectable } from '@nestjs/common';
import type { TerminalActionRequest } from '../../state/actions/action-request';

/**
 * The terminal requests the engine itself made (the terminals API, the record of a terminal that ended by itself),
 * told apart from one rebuilt from JSON (a retry of a recorded terminal action) by the very object: such a request
 * has no client to drive the terminal, and is refused. Weakly held, so nothing stays behind a request.
 */
@Injectable()
export class TerminalRequests {
  private readonly made = new WeakSet<TerminalActionRequest>();

  /** Marks `request` as made by the engine and answers it. */
  make<R extends TerminalActionRequest>(request: R): R {
    this.made.add(request);
    return request;
  }

  has(request: TerminalActionRequest): boolean {
    return this.made.has(request);
  }
}
