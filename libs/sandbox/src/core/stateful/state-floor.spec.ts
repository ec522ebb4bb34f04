import { stateFloor } from './state-floor';

describe('stateFloor', () => {
  const none = { live: [], holdsState: false, explicitTier: false };

  it('keeps the caller floor when the session holds no state and the action starts none', () => {
    expect(stateFloor({}, none)).toEqual({});
    expect(stateFloor({ minTier: 'pooled', floorReason: 'template' }, none)).toEqual({
      minTier: 'pooled',
      floorReason: 'template',
    });
  });

  it('raises an action of a session with a running kernel or process in pooled to pooled, saying why', () => {
    const floor = stateFloor({}, { ...none, live: ['subprocess', 'pooled'] });
    expect(floor).toMatchObject({ minTier: 'pooled', announce: true });
    expect(floor.floorReason).toMatch(/kernels or background processes in the pooled tier/);
  });

  it('never lowers a stronger caller floor', () => {
    expect(stateFloor({ minTier: 'container', floorReason: 'retry' }, { ...none, live: ['pooled'] })).toEqual(
      {
        minTier: 'container',
        floorReason: 'retry',
      },
    );
    expect(
      stateFloor(
        { minTier: 'pooled' },
        { live: [], holdsState: true, explicitTier: false, stateTier: 'pooled' },
      ),
    ).toEqual({ minTier: 'pooled' });
  });

  it('sends new state to the state tier unless the caller named a tier', () => {
    const auto = stateFloor({}, { live: [], holdsState: true, explicitTier: false, stateTier: 'pooled' });
    expect(auto).toMatchObject({ minTier: 'pooled', announce: true });
    expect(auto.floorReason).toMatch(/live in the pooled tier while it is available/);
    expect(stateFloor({}, { live: [], holdsState: true, explicitTier: true, stateTier: 'pooled' })).toEqual(
      {},
    );
    // A fresh action starts no state: only live state raises it.
    expect(stateFloor({}, { live: [], holdsState: false, explicitTier: false, stateTier: 'pooled' })).toEqual(
      {},
    );
  });

  it('raises an explicit weaker tier to where the session state lives', () => {
    expect(stateFloor({}, { live: ['pooled'], holdsState: true, explicitTier: true })).toMatchObject({
      minTier: 'pooled',
    });
  });
});
