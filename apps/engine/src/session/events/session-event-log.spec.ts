import { freshPostgres } from '../../../../../test/support/state-stores';
import { SessionEventLog } from '../../state/events/session-event-log';
import { SessionEvents } from './session-events';

jest.setTimeout(30_000);

describe('SessionEventLog (Postgres)', () => {
  let pg: Awaited<ReturnType<typeof freshPostgres>>;
  beforeEach(async () => {
    pg = await freshPostgres();
  });
  afterEach(() => pg.close());

  it("keeps each session's last events in order, so another replica continues the ids and replays them", async () => {
    const log = new SessionEventLog(await pg.open(), 3);
    const bus = new SessionEvents(3, undefined, (sessionId, event) => log.append(sessionId, event));
    for (let i = 0; i < 5; i++) bus.publish('s', 'action.output', { i });
    bus.publish('t', 'action.started', { other: true });
    await log.flush();

    // Another replica, on its own pool, takes the session over.
    const successor = new SessionEventLog(await pg.open(), 3);
    const recent = await successor.recent('s');
    expect(recent.map((e) => [e.id, e.data.i])).toEqual([
      [3, 2],
      [4, 3],
      [5, 4],
    ]);
    const next = new SessionEvents(3);
    next.restore('s', recent);
    expect(next.subscribe('s', 4, { onEvent: () => undefined, onEnd: () => undefined }).replay).toEqual(
      recent.slice(2),
    );
    expect(next.publish('s', 'action.started', {}).id).toBe(6);
    expect((await successor.recent('t')).map((e) => e.data)).toEqual([{ other: true }]);

    await successor.drop('s');
    expect(await log.recent('s')).toEqual([]);
    expect(await log.recent('t')).toHaveLength(1);
  });

  it('writes many events in batches without losing or reordering one', async () => {
    const log = new SessionEventLog(await pg.open(), 2000);
    const bus = new SessionEvents(2000, undefined, (sessionId, event) => log.append(sessionId, event));
    for (let i = 0; i < 1500; i++) bus.publish('s', 'action.output', { i });
    await log.flush();
    const ids = (await log.recent('s')).map((e) => e.id);
    expect(ids).toEqual(Array.from({ length: 1500 }, (_, i) => i + 1));
  });
});
