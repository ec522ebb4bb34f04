/**
 * What the benches that drive a whole engine share: starting one as `run.ts` does (`createEngineApp`, its own data
 * directory) with a small client for its API, timing, waiting, and a raw `docker exec` of python `print(1)`, the
 * baseline the container tiers are held against.
 */
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import type { INestApplication } from '@nestjs/common';
import type Dockerode from 'dockerode';
import { createEngineApp } from '../apps/engine/src/bootstrap';
import { loadEngineConfig } from '../apps/engine/src/platform/config/engine-config';

export const sleep = (n: number) => new Promise((resolve) => setTimeout(resolve, n));

export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Polls `check` every `everyMs` until it holds; throws after `withinMs`. */
export async function until(
  check: () => boolean | Promise<boolean>,
  withinMs: number,
  what: string,
  everyMs = 1,
): Promise<void> {
  const deadline = performance.now() + withinMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`bench: ${what} not within ${withinMs} ms`);
    await sleep(everyMs);
  }
}

/** An engine started as `run.ts` starts one, with its own data directory, and a small client for its API. */
export async function startEngine(dataDir: string, env: Record<string, string> = {}) {
  const app: INestApplication = await createEngineApp(
    loadEngineConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'error', ...env }),
  );
  await app.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  const call = async (method: string, url: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return res.status === 204 ? undefined : res.json();
  };
  const newSession = async (): Promise<string> => ((await call('POST', '/v1/sessions')) as { id: string }).id;
  /** python print(1) in `tier`; throws unless it printed 1 there; resolves with the action's id. */
  const print1 = async (sessionId: string, tier: 'subprocess' | 'pooled' | 'container'): Promise<string> => {
    const r = await call('POST', `/v1/sessions/${sessionId}/actions`, {
      type: 'code',
      language: 'python',
      code: 'print(1)',
      tier,
    });
    if (r.status !== 'succeeded' || r.stdout !== '1\n' || r.tier !== tier) {
      throw new Error(`bench: ${tier} print(1) did not succeed: ${JSON.stringify(r).slice(0, 500)}`);
    }
    return r.id as string;
  };
  /** The container (pod) an action ran in, from the action's view. */
  const sandboxOf = async (sessionId: string, actionId: string): Promise<string> => {
    const view = await call('GET', `/v1/sessions/${sessionId}/actions/${actionId}`);
    const id = view?.sandbox?.containerId as string | undefined;
    if (!id)
      throw new Error(`bench: action ${actionId} names no sandbox: ${JSON.stringify(view).slice(0, 300)}`);
    return id;
  };
  const endSession = (sessionId: string) => call('DELETE', `/v1/sessions/${sessionId}`);
  const health = async (tier: string): Promise<{ available: boolean; reason?: string }> =>
    ((await call('GET', '/health')) as { tiers: Record<string, { available: boolean; reason?: string }> })
      .tiers[tier] ?? { available: false, reason: 'not registered' };
  return { app, call, newSession, print1, sandboxOf, endSession, health };
}

export type BenchEngine = Awaited<ReturnType<typeof startEngine>>;

/** Raw `docker exec` (dockerode) of python `print(1)` into a running container; throws unless it printed 1. */
export async function dockerExecPrint1(docker: Dockerode, id: string): Promise<void> {
  const exec = await docker.getContainer(id).exec({
    Cmd: ['/usr/bin/python3', '-c', 'print(1)'],
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  await new Promise((resolve) => {
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', resolve);
    stream.on('close', resolve);
  });
  const info = await exec.inspect();
  const stdout = demuxStdout(Buffer.concat(chunks));
  if (info.ExitCode !== 0 || stdout !== '1\n') {
    throw new Error(`bench: docker exec exit ${info.ExitCode}: ${JSON.stringify(stdout)}`);
  }
}

/** Stdout of Docker's multiplexed attach stream (8-byte frame headers: stream, 0, 0, 0, size as uint32 BE). */
function demuxStdout(data: Buffer): string {
  let stdout = '';
  for (let at = 0; at + 8 <= data.length;) {
    const size = data.readUInt32BE(at + 4);
    if (data[at] === 1) stdout += data.subarray(at + 8, at + 8 + size).toString('utf8');
    at += 8 + size;
  }
  return stdout;
}
