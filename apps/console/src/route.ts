/** The console's places, in the URL's hash so a link or a reload opens the same view. */
export type Route =
  | { view: 'sessions' }
  | { view: 'health' }
  | { view: 'approvals' }
  | { view: 'timeline'; sessionId: string; actionId?: string }
  | { view: 'graph'; sessionId: string }
  | { view: 'live'; sessionId: string }
  | { view: 'failure'; sessionId: string; actionId: string }
  | { view: 'file'; sessionId: string; path: string }
  | { view: 'plans'; sessionId: string; planId?: string };

export function parseRoute(hash: string): Route {
  const [pathPart, queryPart = ''] = hash.replace(/^#\/?/, '').split('?');
  const parts = pathPart.split('/').filter(Boolean).map(decodeURIComponent);
  const query = new URLSearchParams(queryPart);
  if (parts[0] === 'health') return { view: 'health' };
  if (parts[0] === 'approvals') return { view: 'approvals' };
  if (parts[0] !== 'sessions' || !parts[1]) return { view: 'sessions' };
  const sessionId = parts[1];
  switch (parts[2]) {
    case 'graph':
      return { view: 'graph', sessionId };
    case 'live':
      return { view: 'live', sessionId };
    case 'actions':
      if (parts[3] && parts[4] === 'failure') return { view: 'failure', sessionId, actionId: parts[3] };
      return { view: 'timeline', sessionId, actionId: parts[3] };
    case 'file':
      return { view: 'file', sessionId, path: query.get('path') ?? '' };
    case 'plans':
      return { view: 'plans', sessionId, planId: parts[3] };
    default:
      return { view: 'timeline', sessionId };
  }
}

const seg = encodeURIComponent;

export function href(route: Route): string {
  switch (route.view) {
    case 'sessions':
      return '#/sessions';
    case 'health':
      return '#/health';
    case 'approvals':
      return '#/approvals';
    case 'timeline':
      return `#/sessions/${seg(route.sessionId)}${route.actionId ? `/actions/${seg(route.actionId)}` : ''}`;
    case 'graph':
      return `#/sessions/${seg(route.sessionId)}/graph`;
    case 'live':
      return `#/sessions/${seg(route.sessionId)}/live`;
    case 'failure':
      return `#/sessions/${seg(route.sessionId)}/actions/${seg(route.actionId)}/failure`;
    case 'file':
      return `#/sessions/${seg(route.sessionId)}/file?path=${seg(route.path)}`;
    case 'plans':
      return `#/sessions/${seg(route.sessionId)}/plans${route.planId ? `/${seg(route.planId)}` : ''}`;
  }
}
