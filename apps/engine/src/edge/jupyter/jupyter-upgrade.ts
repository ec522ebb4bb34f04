import { ForbiddenError, NotFoundError } from '@switchyard/common';
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiKeys } from '../http/api-keys';
import { jupyterPrincipal, jupyterToken } from './jupyter-auth.guard';

/** Where a kernel's channels WebSocket is: under the session's Jupyter base URL, as a gateway client builds it. */
const CHANNELS_PATH = /^\/v1\/sessions\/([^/]+)\/jupyter\/api\/kernels\/([^/]+)\/channels\/?$/;

export interface ChannelsTarget {
  sessionId: string;
  kernelId: string;
}

const decode = (part: string): string => {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
};

/** The session and kernel an upgrade request's URL names (its query, a Jupyter `session_id`, is not read), or 404. */
export function channelsTarget(url: string | undefined): ChannelsTarget {
  const pathname = (url ?? '').split('?', 1)[0];
  const m = CHANNELS_PATH.exec(pathname);
  if (!m) {
    throw new NotFoundError(
      'no WebSocket here: the one WebSocket route is /v1/sessions/{sessionId}/jupyter/api/kernels/{kernelId}/channels',
    );
  }
  return { sessionId: decode(m[1]), kernelId: decode(m[2]) };
}

/**
 * Refuses a WebSocket opened by a page of another site (a browser sends that page's `Origin`; a WebSocket is not
 * held to CORS): it could otherwise drive a kernel of an engine without keys from any page the user visits. Clients
 * that are not browsers send no `Origin`, or their target's own.
 */
export function refuseCrossOrigin(headers: IncomingHttpHeaders): void {
  const { origin, host } = headers;
  if (origin === undefined) return;
  let originHost: string | undefined;
  try {
    originHost = new URL(origin).host;
  } catch {
    originHost = undefined;
  }
  if (originHost === undefined || originHost.toLowerCase() !== (host ?? '').toLowerCase()) {
    throw new ForbiddenError(
      `a WebSocket from the origin ${JSON.stringify(origin)} is refused: only a client of this host may connect`,
      'CROSS_ORIGIN',
    );
  }
}

/**
 * The tenant opening a channels WebSocket: the one of the key it sends (`token KEY` or `Bearer KEY`), as for every
 * Jupyter route. With `kernelIdAuth` (SWITCHYARD_JUPYTER_KERNEL_ID_AUTH), a request without a key that names a live
 * Jupyter kernel is its tenant's: the kernel id was answered only to a holder of the key. Otherwise 401.
 */
export function channelsTenant(
  keys: ApiKeys,
  headers: IncomingHttpHeaders,
  kernelIdAuth: boolean,
  ownerOfKernel: () => string | undefined,
): string {
  if (kernelIdAuth && !keys.open && jupyterToken(headers.authorization) === undefined) {
    const owner = ownerOfKernel();
    if (owner !== undefined) return owner;
  }
  return jupyterPrincipal(keys, headers.authorization).tenant;
}
