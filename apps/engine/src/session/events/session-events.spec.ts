import { type SessionEvent, SessionEvents } from './session-events';

const collect = () => {
  const events: SessionEvent[] = [];
  let ended = false;
  return {
    events,
    ended: () => ended,
    listener: { onEvent: (e: SessionEvent) => events.push(e), onEnd: () => (ended = true) },
  };
};

describe('SessionEvents', () => {
  it('numbers events per session and delivers them live', () => {
    const bus = new SessionEvents(10);
    const a = collect();
    bus.subscribe('s1', undefined, a.listener);
    bus.publish('s1', 'action.started', { actionId: 'x' });
    bus.publish('s2', 'action.started', { actionId: 'y' });
    bus.publish('s1', 'action.completed', { actionId: 'x' });
    expect(a.events.map((e) => [e.id, e.type])).toEqual([
      [1, 'action.started'],
      [2, 'action.completed'],
    ]);
  });

  it('replays what is buffered after Last-Event-ID and names the ids already dropped', () => {
    const bus = new SessionEvents(3);
    for (let i = 0; i < 5; i++) bus.publish('s', 'action.output', { i });
    const resumed = bus.subscribe('s', 3, collect().listener);
    expect(resumed.replay.map((e) => e.id)).toEqual([4, 5]);
    expect(resumed.gap).toBeUndefined();
    const late = bus.subscribe('s', 0, collect().listener);
    expect(late.replay.map((e) => e.id)).toEqual([3, 4, 5]);
    expect(late.gap).toEqual({ firstMissingId: 1, lastMissingId: 2 });
    // A client that saw the last dropped event missed nothing; one that sends no id asks only for what is buffered.
    expect(bus.subscribe('s', 2, collect().listener).gap).toBeUndefined();
    expect(bus.subscribe('s', undefined, collect().listener).gap).toBeUndefined();
  });

  it('tells subscribers when the session ends and stops delivering after unsubscribe', () => {
    const bus = new SessionEvents(10);
    const a = collect();
    const b = collect();
    const subA = bus.subscribe('s', undefined, a.listener);
    bus.subscribe('s', undefined, b.listener);
    subA.unsubscribe();
    bus.publish('s', 'action.started', {});
    expect(a.events).toHaveLength(0);
    bus.end('s');
    expect(b.ended()).toBe(true);
    expect(a.ended()).toBe(false);
  });

  it('hands every event to its sink as published', () => {
    const seen: Array<[string, number]> = [];
    const bus = new SessionEvents(2, undefined, (sessionId, event) => seen.push([sessionId, event.id]));
    bus.publish('s', 'action.started', {});
    bus.publish('t', 'action.started', {});
    bus.publish('s', 'action.completed', {});
    expect(seen).toEqual([
      ['s', 1],
      ['t', 1],
      ['s', 2],
    ]);
  });

  it('restores a stream another engine published: its buffer replays, and ids continue after the last', () => {
    const bus = new SessionEvents(2);
    const earlier: SessionEvent[] = [5, 6, 7].map((id) => ({
      id,
      type: 'action.output',
      at: '2026-01-01T00:00:00.000Z',
      data: { id },
    }));
    bus.restore('s', earlier);
    const resumed = bus.subscribe('s', 5, collect().listener);
    expect(resumed.replay.map((e) => e.id)).toEqual([6, 7]);
    expect(resumed.gap).toBeUndefined();
    expect(bus.publish('s', 'action.started', {}).id).toBe(8);
    // A stream this engine already has is its own truth.
    bus.restore('s', []);
    expect(bus.publish('s', 'action.started', {}).id).toBe(9);
    bus.restore('empty', []);
    expect(bus.publish('empty', 'action.started', {}).id).toBe(1);
  });
});
