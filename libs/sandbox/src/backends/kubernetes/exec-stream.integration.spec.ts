/**
 * `KubeClient.execStream` against the real test cluster (`bash scripts/k8s.sh start`): a command in a session pod
 * with its stdin, stdout and stderr streamed both ways, as the file transfer API uses it. The kubeconfig comes from
 * `$KUBECONFIG`, else `.runtime/k8s/kubeconfig`. A missing or unreachable cluster fails the suite: it never skips.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Logger } from '@nestjs/common';
import { TEST_IMAGE_SOURCE } from '../../../test/sandbox-image';
import { ClientNodeKubeClient } from './client-node-kube-client';
import type { ExecStream } from './kube-types';
import { RUNNER_CONTAINER } from './kubernetes.constants';
import { resolveKubernetesOptions } from './kubernetes.options';
import { KubernetesSandbox } from './kubernetes-sandbox';

const REPO = path.resolve(__dirname, '../../../../..');
const KUBECONFIG = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
const NAMESPACE = 'switchyard-test';
const MiB = 2 ** 20;

if (!fs.existsSync(KUBECONFIG)) {
  throw new Error(
    `no kubeconfig at ${KUBECONFIG}: start the test cluster with \`bash scripts/k8s.sh start\``,
  );
}
const image = resolveKubernetesOptions({ ...TEST_IMAGE_SOURCE, kubeconfigPath: KUBECONFIG }).image;
if (!image) throw new Error('no sandbox image tag: run `npx node scripts/sandbox-image.mjs`');

Logger.overrideLogger(['error', 'warn']);

const S = 'ses_k8s_exec_stream';
let sandbox: KubernetesSandbox;
let client: ClientNodeKubeClient;
let pod = '';

function exec(argv: string[]): Promise<ExecStream> {
  return client.execStream(pod, RUNNER_CONTAINER, argv);
}

async function sha256Of(stream: Readable): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    bytes += (chunk as Buffer).length;
    hash.update(chunk as Buffer);
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Resolves once `check` holds, polled every 50 ms. */
async function until(check: () => boolean | Promise<boolean>, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the condition did not hold in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  const nodes = await new ClientNodeKubeClient({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    apiTimeoutMs: 10_000,
    execTimeoutMs: 30_000,
  })
    .nodeNames()
    .catch((err: Error) => {
      throw new Error(`the test cluster does not answer (${err.message}): run \`bash scripts/k8s.sh start\``);
    });
  if (!nodes[0]) throw new Error('the test cluster has no ready node');
  const options = resolveKubernetesOptions({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    image,
    nodeName: nodes[0],
    min: 0,
    max: 1,
    acquireTimeoutMs: 60_000,
    limits: {
      pooled: { cpus: 0.5, memoryBytes: 256 * MiB, tmpBytes: 16 * MiB, workspaceBytes: 256 * MiB },
      container: { cpus: 0.25, memoryBytes: 160 * MiB, tmpBytes: 16 * MiB, workspaceBytes: 64 * MiB },
    },
  });
  client = new ClientNodeKubeClient({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    apiTimeoutMs: options.apiTimeoutMs,
    execTimeoutMs: options.execTimeoutMs,
  });
  sandbox = new KubernetesSandbox(options, client);
  await sandbox.start();
  pod = (await sandbox.sessions.podFor(S)).name;
}, 120_000);

afterAll(async () => {
  await sandbox?.onApplicationShutdown();
}, 60_000);

describe('KubeClient.execStream on a real cluster', () => {
  it('streams 48 MiB through a command both ways, byte for byte, and ends with its exit code', async () => {
    const data = randomBytes(48 * MiB);
    const x = await exec(['/bin/sh', '-c', 'cat; echo done >&2; exit 7']);
    const stderr = sha256Of(x.stderr);
    const [out] = await Promise.all([
      sha256Of(x.stdout),
      pipeline(Readable.from(chunks(data, 256 * 1024)), x.stdin),
    ]);
    expect(out).toEqual({ bytes: data.length, sha256: createHash('sha256').update(data).digest('hex') });
    expect(await x.exit).toEqual({ exitCode: 7 });
    expect((await stderr).bytes).toBe(5);
  });

  it('stops the server sending while nobody reads stdout (the socket is paused), then delivers it all', async () => {
    const x = await exec(['/bin/sh', '-c', 'head -c 64M /dev/zero']);
    x.stdin.end();
    x.stderr.resume();
    // Whatever arrives is held until read: it must stop far short of 64 MiB (the rest waits in the pod).
    let last = -1;
    await until(() => {
      const held = x.stdout.readableLength;
      const still = held === last;
      last = held;
      return still && held > 0;
    }, 20_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(x.stdout.readableLength).toBeLessThan(8 * MiB);
    expect((await sha256Of(x.stdout)).bytes).toBe(64 * MiB);
    expect(await x.exit).toEqual({ exitCode: 0 });
  });

  it('takes a program of tens of KiB in argv (the file transfer program goes that way)', async () => {
    const filler = `# ${'x'.repeat(40_000)}\nimport sys\nprint(len(sys.argv[1]), sys.stdin.read())`;
    const x = await exec(['python3', '-I', '-S', '-c', filler, 'y'.repeat(1000)]);
    x.stdin.end('stdin-ok');
    x.stderr.resume();
    expect((await readAll(x.stdout)).toString()).toBe('1000 stdin-ok\n');
    expect(await x.exit).toEqual({ exitCode: 0 });
  });

  it("ends the command's stdin when the connection is dropped, and then has no exit status", async () => {
    const x = await exec([
      '/bin/sh',
      '-c',
      'cat > /workspace/dropped.bin; echo "ended $?" > /workspace/dropped.txt',
    ]);
    x.stdin.write(Buffer.alloc(MiB));
    x.close();
    await expect(x.exit).rejects.toMatchObject({ code: 'KUBE_STREAM' });
    // The command saw its stdin end (EOF) and went on: what a pod program relies on to drop an abandoned upload.
    await until(async () => (await readFileInPod('/workspace/dropped.txt')) === 'ended 0\n', 20_000);
  });

  it("reports a command that cannot start as exit -1 with the server's message", async () => {
    const x = await exec(['/no/such/program']);
    x.stdin.end();
    x.stdout.resume();
    x.stderr.resume();
    const exit = await x.exit;
    expect(exit).toEqual({ exitCode: -1, message: expect.stringContaining('/no/such/program') as string });
  });
});

function* chunks(data: Buffer, size: number): Generator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

async function readFileInPod(file: string): Promise<string> {
  const r = await client.exec(pod, RUNNER_CONTAINER, ['/bin/sh', '-c', `cat ${file} 2>/dev/null || true`]);
  return r.stdout.toString('utf8');
}
