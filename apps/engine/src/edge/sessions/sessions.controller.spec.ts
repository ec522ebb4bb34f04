import type { ContextGraph, SessionActivity } from '@switchyard/context-graph';
import type { Session } from '../../state/sessions/session.model';
import { SessionsController } from './sessions.controller';
import { SessionsService } from '../../session/sessions/sessions.service';

/** Answers `sessionActivity` from a fixed table and records every call. */
class RecordingGraph {
  readonly calls: string[][] = [];
  constructor(private readonly table: Record<string, SessionActivity>) {}

  async sessionActivity(ids: readonly string[]): Promise<Map<string, SessionActivity>> {
    this.calls.push([...ids]);
    return new Map(ids.filter((id) => id in this.table).map((id) => [id, this.table[id]]));
  }
}

const session = (id: string, tenant = 'open'): Session => ({
  id,
  tenant,
  createdAt: new Date('2025-01-01T00:00:00.000Z'),
  lastActiveAt: new Date('2025-01-01T00:00:10.000Z'),
  ttlSeconds: 60,
  metadata: {},
  maxConcurrentActions: 1,
  network: { allow: [] },
});

const busy: SessionActivity = {
  actions: 3,
  byStatus: { succeeded: 2, failed: 1 },
  tiers: ['engine', 'subprocess'],
  lastActionAt: '2025-01-01T00:00:09.000Z',
};
const none = { actions: 0, byStatus: {}, tiers: [], lastActionAt: null };

describe('SessionsController: tenant and activity', () => {
  let graph: RecordingGraph;
  let service: SessionsService;
  let controller: SessionsController;
  const sessions = [session('ses_a'), session('ses_b'), session('ses_c')];

  beforeEach(() => {
    graph = new RecordingGraph({ ses_a: busy, ses_b: { ...none } });
    // Only the graph is used by what is tested here; the rest of the service's collaborators stay unset.
    service = new SessionsService(
      {} as never,
      {} as never,
      {} as never,
      {} as never,
      graph as unknown as ContextGraph,
      {} as never,
    );
    jest
      .spyOn(service, 'listAll')
      .mockImplementation((tenant) => Promise.resolve(sessions.filter((s) => s.tenant === tenant)));
    jest
      .spyOn(service, 'get')
      .mockImplementation((_tenant, id) => sessions.find((s) => s.id === id) ?? sessions[0]);
    controller = new SessionsController(service);
  });

  it('lists every session with its tenant and activity, asking the graph once for all of them', async () => {
    const { sessions: listed } = await controller.list('open');

    expect(graph.calls).toEqual([['ses_a', 'ses_b', 'ses_c']]);
    expect(listed.map((s) => [s.id, s.tenant, s.activity])).toEqual([
      ['ses_a', 'open', busy],
      ['ses_b', 'open', none],
      // Not in the graph: counted as having run nothing, not left out.
      ['ses_c', 'open', none],
    ]);
  });

  it('describes one session with its tenant and activity', async () => {
    const described = await controller.get('open', 'ses_a');
    expect(graph.calls).toEqual([['ses_a']]);
    expect(described).toMatchObject({ id: 'ses_a', tenant: 'open', activity: busy });
  });

  it('asks the graph nothing for a tenant without sessions', async () => {
    expect(await controller.list('t_0000000000000000')).toEqual({ sessions: [] });
    expect(graph.calls).toEqual([]);
  });
});
