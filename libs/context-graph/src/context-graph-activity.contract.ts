import { at, completion, session, start } from './context-graph-records.contract';
import type { ContextGraph } from './context-graph.port';
import type { ActionCompletion, ActionStart, SessionActivity, SessionRecord } from './context-graph.types';

/** The contract's current graph. */
export interface ActivityContractContext {
  graph(): ContextGraph;
}

const NO_ACTIVITY: SessionActivity = { actions: 0, byStatus: {}, tiers: [], lastActionAt: null };

/**
 * The contract for `sessionActivity` (the short account of what sessions ran, for lists of sessions), registered
 * inside `describeContextGraphContract` so every adapter runs it.
 */
export function describeActivityContract(ctx: ActivityContractContext): void {
  describe('session activity', () => {
    const recorded = async (overrides: Partial<SessionRecord> = {}): Promise<SessionRecord> => {
      const s = session(overrides);
      await ctx.graph().recordSession(s);
      return s;
    };

    /** Starts an action and, unless `c` is null, completes it. */
    const ran = async (
      sessionId: string,
      s: Partial<ActionStart>,
      c: Partial<ActionCompletion> | null = {},
    ): Promise<ActionStart> => {
      const a = start(sessionId, s);
      await ctx.graph().recordActionStarted(a);
      if (c !== null) await ctx.graph().recordActionCompleted(a.id, completion(a, c));
      return a;
    };

    /** The answer as entries, so the order of the map is checked too. */
    const activity = async (ids: readonly string[]): Promise<[string, SessionActivity][]> => [
      ...(await ctx.graph().sessionActivity(ids)),
    ];

    it('counts actions by status, names each tier used once and sorted, and gives the latest start', async () => {
      const s = await recorded();
      await ran(s.id, { startedAt: at(1), tier: 'subprocess' });
      await ran(s.id, { startedAt: at(2), tier: 'subprocess' }, { status: 'failed', exitCode: 1 });
      await ran(s.id, { startedAt: at(3), tier: 'container' }, { status: 'timed_out' });
      await ran(s.id, { startedAt: at(4), type: 'file', operation: 'write', tier: 'engine' });
      await ran(s.id, { startedAt: at(5), type: 'browser', operation: 'goto', tier: 'browser' });
      // Refused before routing: counted, but `none` is no tier.
      await ran(
        s.id,
        { startedAt: at(6), tier: 'none' },
        { status: 'denied', error: { class: 'policy', message: 'refused' } },
      );
      // Routed to one tier, recorded on completion as another: the tier it ended in counts.
      await ran(s.id, { startedAt: at(7), tier: 'subprocess' }, { tier: 'pooled' });
      await ran(s.id, { startedAt: at(8), tier: 'subprocess' }, null); // still running

      expect(await activity([s.id])).toEqual([
        [
          s.id,
          {
            actions: 8,
            byStatus: { running: 1, succeeded: 4, failed: 1, timed_out: 1, denied: 1 },
            tiers: ['browser', 'container', 'engine', 'pooled', 'subprocess'],
            lastActionAt: at(8),
          },
        ],
      ]);
    });

    it('answers for many sessions at once, in the order asked, each once; unknown ids are absent', async () => {
      const busy = await recorded();
      const idle = await recorded();
      const other = await recorded({ tenant: 'globex' });
      await ran(busy.id, { startedAt: at(10) });
      await ran(busy.id, { startedAt: at(3) }, { status: 'failed', exitCode: 1 }); // recorded later, started earlier
      await ran(other.id, { startedAt: at(4), tier: 'pooled' }, { status: 'cancelled' });

      expect(await activity([other.id, 'no-such-session', busy.id, idle.id, busy.id])).toEqual([
        [other.id, { actions: 1, byStatus: { cancelled: 1 }, tiers: ['pooled'], lastActionAt: at(4) }],
        [
          busy.id,
          { actions: 2, byStatus: { succeeded: 1, failed: 1 }, tiers: ['subprocess'], lastActionAt: at(10) },
        ],
        [idle.id, NO_ACTIVITY],
      ]);
      expect(await activity(['no-such-session'])).toEqual([]);
    });

    it('answers an empty map for no ids', async () => {
      await ran((await recorded()).id, {});
      const answer = await ctx.graph().sessionActivity([]);
      expect(answer).toBeInstanceOf(Map);
      expect(answer.size).toBe(0);
    });

    it('keeps answering for an ended session, and counts only its own actions in a fork', async () => {
      const source = await recorded();
      await ran(source.id, { startedAt: at(1) });
      await ran(
        source.id,
        { startedAt: at(2) },
        { status: 'error', error: { class: 'spawn', message: 'x' } },
      );
      const fork = await recorded();
      await ctx.graph().recordFork({ sessionId: fork.id, fromSessionId: source.id, forkedAt: at(3), seq: 2 });
      await ctx.graph().endSession(source.id, at(4), 'deleted');

      expect(await activity([source.id, fork.id])).toEqual([
        [
          source.id,
          { actions: 2, byStatus: { succeeded: 1, error: 1 }, tiers: ['subprocess'], lastActionAt: at(2) },
        ],
        [fork.id, NO_ACTIVITY],
      ]);
    });

    it('marks interrupted actions as such', async () => {
      const s = await recorded();
      await ran(s.id, { startedAt: at(1) }, null);
      await ctx.graph().markRunningInterrupted(at(5));
      expect((await ctx.graph().sessionActivity([s.id])).get(s.id)).toEqual({
        actions: 1,
        byStatus: { interrupted: 1 },
        tiers: ['subprocess'],
        lastActionAt: at(1),
      });
    });
  });
}
