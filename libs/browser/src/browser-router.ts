import { Injectable } from '@nestjs/common';

export interface BrowserAvailability {
  available: boolean;
  reason?: string;
}

/**
 * Routes browser actions to a shared or a dedicated browser. This build has no browser support yet:
 * the router reports itself unavailable so the engine records browser actions as `denied`.
 */
@Injectable()
export class BrowserRouter {
  async availability(): Promise<BrowserAvailability> {
    return { available: false, reason: 'browser tier not enabled in this engine build' };
  }
}
