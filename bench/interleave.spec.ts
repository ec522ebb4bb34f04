import { interleave, loadAverage, withLoad } from './interleave';

describe('interleave', () => {
  it('samples every side once a round, the order rotating, and keeps no warm-up round', async () => {
    const calls: string[] = [];
    const side = (name: string) => async () => {
      calls.push(name);
      return calls.length;
    };
    const samples = await interleave(3, { a: side('a'), b: side('b'), c: side('c') }, 1);
    expect(calls.join('')).toBe('abcbcacababc');
    // Round 0 (abc) is the warm-up; then bca, cab, abc.
    expect(samples).toEqual({ a: [6, 8, 10], b: [4, 9, 11], c: [5, 7, 12] });
  });
});

describe('withLoad', () => {
  it('prints the load average before and after the section, also when it throws', async () => {
    const lines: string[] = [];
    const log = jest.spyOn(console, 'log').mockImplementation((line: string) => void lines.push(line));
    try {
      await expect(
        withLoad('x', async () => {
          lines.push('section');
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
    } finally {
      log.mockRestore();
    }
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^\n\[x\] load average before: [\d.]+ \/ [\d.]+ \/ [\d.]+ \(1 \/ 5 \/ 15 min, \d+ cores\)$/,
    );
    expect(lines[1]).toBe('section');
    expect(lines[2]).toMatch(/^\[x\] load average after: /);
    expect(loadAverage()).toMatch(/cores\)$/);
  });
});
