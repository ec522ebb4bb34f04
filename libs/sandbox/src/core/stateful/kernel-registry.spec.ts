import { systemClock, type Language } from '@switchyard/common';
import { type Kernel, KernelRegistry } from './kernel-registry';
import type { StatefulBox } from './stateful-box.port';
import type { StatefulTier } from './stateful.types';

const box = {} as StatefulBox;
const kernel = (id: string, language: Language, tier: StatefulTier, sessionId = 's1'): Kernel => ({
  id,
  sessionId,
  language,
  tier,
  box,
  workspaceDir: '/w',
  baseEnv: {},
  executionCount: 0,
  busy: false,
  startedAt: '2026-01-01T00:00:00.000Z',
  lastUsedAt: '2026-01-01T00:00:00.000Z',
  tail: Promise.resolve(),
  unpin: () => undefined,
  ended: false,
});

describe('KernelRegistry.pick', () => {
  it('starts a kernel in the routed tier when the session has none of the language', () => {
    const r = new KernelRegistry(systemClock);
    r.add(kernel('k-node', 'node', 'pooled'));
    expect(r.pick('s1', 'python', 'subprocess', false)).toEqual({ kernel: undefined, skipped: [] });
  });

  it('never uses a kernel of a weaker tier than the routed one, and says which it skipped', () => {
    const r = new KernelRegistry(systemClock);
    const weak = kernel('k-sub', 'python', 'subprocess');
    r.add(weak);
    expect(r.pick('s1', 'python', 'pooled', false)).toEqual({ kernel: undefined, skipped: [weak] });
  });

  it('uses the strongest existing kernel at or above the routed tier, unless a tier was asked for', () => {
    const r = new KernelRegistry(systemClock);
    const weak = kernel('k-sub', 'python', 'subprocess');
    const strong = kernel('k-pool', 'python', 'pooled');
    r.add(weak);
    r.add(strong);
    expect(r.pick('s1', 'python', 'subprocess', false).kernel).toBe(strong);
    expect(r.pick('s1', 'python', 'subprocess', true).kernel).toBe(weak);
    expect(r.pick('s1', 'python', 'pooled', true).kernel).toBe(strong);
  });

  it('keeps sessions apart and forgets ended kernels', () => {
    const r = new KernelRegistry(systemClock);
    const other = kernel('k-other', 'python', 'subprocess', 's2');
    r.add(other);
    expect(r.pick('s1', 'python', 'subprocess', false).kernel).toBeUndefined();
    expect(() => r.get('s1', 'k-other')).toThrow(/not found in session s1/);
    other.ended = true;
    expect(r.pick('s2', 'python', 'subprocess', false).kernel).toBeUndefined();
    expect(r.remove(other)).toBe(true);
    expect(r.of('s2')).toEqual([]);
  });
});
