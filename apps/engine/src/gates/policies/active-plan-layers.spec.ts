import { ActivePlanLayers } from './active-plan-layers';
import type { PolicyLayer } from '../../state/policies/policy.types';

const layer = (source: string): PolicyLayer => ({ layer: 'plan', source, rules: [] });

describe('ActivePlanLayers', () => {
  it('holds a layer while any of its steps is in flight, per session, and forgets it after the last', () => {
    const active = new ActivePlanLayers();
    const a = layer('plan a');
    const b = layer('plan b');
    const leaveA1 = active.enter('s1', a);
    const leaveA2 = active.enter('s1', a);
    const leaveB = active.enter('s2', b);
    expect(active.of('s1')).toEqual([a]);
    expect(active.of('s2')).toEqual([b]);
    leaveA1();
    leaveA1(); // a second call of the same step's release changes nothing
    expect(active.of('s1')).toEqual([a]);
    leaveA2();
    expect(active.of('s1')).toEqual([]);
    leaveB();
    expect(active.of('s2')).toEqual([]);
  });
});
