import { SessionEvents } from '../../session/events/session-events';
import { StreamRelay } from './jupyter-stream-relay';

/** A relay over a real event stream, and what it published. */
function relay(language: 'python' | 'node' = 'python') {
  const events = new SessionEvents(100);
  const published: Array<[string, string]> = [];
  const r = new StreamRelay(
    events,
    'ses_1',
    (_type, c) => published.push([c.name as string, c.text as string]),
    language === 'python',
  );
  const out = (actionId: string, stream: 'stdout' | 'stderr', chunk: string) =>
    events.publish('ses_1', 'action.output', { actionId, stream, chunk });
  return { events, published, relay: r, out };
}

describe('a cell’s live output as Jupyter streams', () => {
  it('relays its own action’s output only, including what came before its id was known', () => {
    const { published, relay: r, out } = relay();
    out('act_1', 'stdout', 'early\n');
    r.follow('act_1');
    out('act_2', 'stdout', 'another action\n');
    out('act_1', 'stderr', 'warning\n');
    r.end(false);
    out('act_1', 'stdout', 'after the end\n');
    expect(published).toEqual([
      ['stdout', 'early\n'],
      ['stderr', 'warning\n'],
    ]);
    expect(r.streamed).toBe(true);
  });

  it('holds back a python traceback: dropped when it is the cell’s error, sent when the cell goes on', () => {
    const failed = relay();
    failed.relay.follow('act_1');
    failed.out('act_1', 'stdout', 'before\n');
    failed.out('act_1', 'stderr', 'note\nTraceback (most recent call last):\n');
    failed.out('act_1', 'stderr', 'ZeroDivisionError: division by zero\n');
    failed.relay.end(true);
    expect(failed.published).toEqual([
      ['stdout', 'before\n'],
      ['stderr', 'note\n'],
    ]);

    const logged = relay();
    logged.relay.follow('act_1');
    logged.out('act_1', 'stderr', 'Traceback (most recent call last):\nValueError: logged\n');
    logged.out('act_1', 'stdout', 'still running\n');
    logged.relay.end(false);
    expect(logged.published).toEqual([
      ['stderr', 'Traceback (most recent call last):\nValueError: logged\n'],
      ['stdout', 'still running\n'],
    ]);
  });

  it('holds nothing back for other languages', () => {
    const { published, relay: r, out } = relay('node');
    r.follow('act_1');
    out('act_1', 'stderr', 'Traceback (most recent call last):\n');
    r.end(true);
    expect(published).toEqual([['stderr', 'Traceback (most recent call last):\n']]);
  });
});
