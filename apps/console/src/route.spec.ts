import { href, parseRoute, type Route } from './route';

describe('console routes', () => {
  const routes: Route[] = [
    { view: 'sessions' },
    { view: 'health' },
    { view: 'approvals' },
    { view: 'timeline', sessionId: 'ses_1' },
    { view: 'timeline', sessionId: 'ses_1', actionId: 'act_2' },
    { view: 'graph', sessionId: 'ses_1' },
    { view: 'live', sessionId: 'ses_1' },
    { view: 'failure', sessionId: 'ses_1', actionId: 'act_2' },
    { view: 'file', sessionId: 'ses_1', path: 'src/a b/ü?.txt' },
    { view: 'plans', sessionId: 'ses_1' },
    { view: 'plans', sessionId: 'ses_1', planId: 'pln_3' },
  ];

  it.each(routes)('reads back what it writes: %j', (route) => {
    expect(parseRoute(href(route))).toEqual(route);
  });

  it('opens the sessions for an empty or unknown hash', () => {
    expect(parseRoute('')).toEqual({ view: 'sessions' });
    expect(parseRoute('#/nowhere/at/all')).toEqual({ view: 'sessions' });
    expect(parseRoute('#/sessions/ses_1/unknown')).toEqual({ view: 'timeline', sessionId: 'ses_1' });
  });
});
