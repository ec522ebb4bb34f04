import { ProcessLog } from './process-log';

describe('ProcessLog', () => {
  it('numbers chunks, answers the tail or what came after a seq', () => {
    const log = new ProcessLog(1024);
    for (const t of ['a', 'b', 'c', 'd']) log.append(t === 'c' ? 'stderr' : 'stdout', t);
    expect(log.read({ tail: 2 }).entries).toEqual([
      { seq: 3, stream: 'stderr', text: 'c' },
      { seq: 4, stream: 'stdout', text: 'd' },
    ]);
    expect(log.read({ sinceSeq: 3 }).entries.map((e) => e.text)).toEqual(['d']);
    expect(log.read()).toMatchObject({ nextSeq: 5, dropped: 0 });
  });

  it('drops the oldest chunks past its byte bound and says how many', () => {
    const log = new ProcessLog(10);
    for (let i = 0; i < 5; i++) log.append('stdout', 'xxxx');
    const { entries, dropped, nextSeq } = log.read();
    expect(entries.map((e) => e.seq)).toEqual([4, 5]);
    expect(dropped).toBe(3);
    expect(nextSeq).toBe(6);
  });
});
