import { Writable } from 'node:stream';

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const SKIP = new Set(['level', 'levelName', 'time', 'pid', 'hostname', 'msg', 'context', 'stack']);

const show = (v: unknown): string => (typeof v === 'string' && !/\s|"/.test(v) ? v : JSON.stringify(v));

/** One JSON log line as a person reads it: `12:00:01 INFO  [Engine] listening url=http://… dataDir=…`. */
export function prettyLine(json: string): string {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof e.time === 'string' ? e.time.slice(11, 19) : '';
  const level = (LEVEL_NAMES[e.level as number] ?? show(e.levelName ?? '')).padEnd(5);
  const context = typeof e.context === 'string' ? `[${e.context}] ` : '';
  const fields = Object.entries(e)
    .filter(([k, v]) => !SKIP.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${show(v)}`)
    .join(' ');
  const stack = typeof e.stack === 'string' ? `\n${e.stack}` : '';
  const msg = typeof e.msg === 'string' ? e.msg : e.msg === undefined ? '' : show(e.msg);
  return `${time} ${level} ${context}${msg}${fields ? ` ${fields}` : ''}${stack}`;
}

/** A destination that turns pino's JSON lines into human-readable ones before writing them to `out`. */
export function prettyStream(out: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim()) out.write(`${prettyLine(line)}\n`);
      done();
    },
  });
}
