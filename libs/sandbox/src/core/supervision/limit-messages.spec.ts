import { emptyResult, enforcedLimit, formatBytes, type LimitSettings } from './limit-messages';

const settings: LimitSettings = {
  memory: 'its 512 MiB limit',
  output: { maxBytes: 2 ** 20, maxLines: 2000 },
  fileSizeBytes: 1000,
  pids: 64,
};

describe('limit messages', () => {
  it('formats whole MiB as such, anything else in bytes', () => {
    expect(formatBytes(64 * 2 ** 20)).toBe('64 MiB');
    expect(formatBytes(1500)).toBe('1500 bytes');
  });

  it('an empty result has no output and no limit', () => {
    expect(emptyResult(7)).toEqual({
      timedOut: false,
      stdout: '',
      stderr: '',
      truncated: { stdout: false, stderr: false },
      durationMs: 7,
    });
  });

  it('names the most telling limit: memory, output, CPU, file size, then pids', () => {
    const ok = { timedOut: false, exitCode: 0 };
    const failed = { timedOut: false, exitCode: 1 };
    expect(enforcedLimit(ok, { oomKilled: true, outputCapped: true }, settings)).toEqual({
      code: 'OUT_OF_MEMORY',
      message: 'out of memory: the run went over its 512 MiB limit',
    });
    expect(enforcedLimit(ok, { outputCapped: true, cpuTime: true }, settings)).toEqual({
      code: 'OUTPUT_CAP',
      message: 'output over 1 MiB or 2000 lines on a stream; the run was stopped',
    });
    expect(enforcedLimit(failed, { cpuTime: true, fileSize: true }, settings)?.code).toBe('CPU_TIME');
    expect(enforcedLimit(failed, { fileSize: true, pidsLimitHit: true }, settings)).toEqual({
      code: 'FILE_SIZE',
      message: 'file size limit of 1000 bytes reached',
    });
    expect(enforcedLimit(failed, { pidsLimitHit: true }, settings)).toEqual({
      code: 'PIDS',
      message: 'process limit of 64 reached',
    });
    expect(enforcedLimit({ timedOut: true }, { pidsLimitHit: true }, settings)?.code).toBe('PIDS');
  });

  it('a refused fork the code survived, or one a tier cannot name, is no outcome', () => {
    expect(enforcedLimit({ timedOut: false, exitCode: 0 }, { pidsLimitHit: true }, settings)).toBeUndefined();
    const noPids = { ...settings, pids: undefined };
    expect(enforcedLimit({ timedOut: false, exitCode: 1 }, { pidsLimitHit: true }, noPids)).toBeUndefined();
    expect(enforcedLimit({ timedOut: false, exitCode: 1 }, {}, settings)).toBeUndefined();
  });
});
