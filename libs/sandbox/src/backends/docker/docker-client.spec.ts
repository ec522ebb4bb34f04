import * as os from 'node:os';
import * as path from 'node:path';
import { Duplex, type Readable } from 'node:stream';
import { Logger } from '@nestjs/common';
import Dockerode from 'dockerode';
import { DockerodeClient } from './docker-client';
import {
  DockerApiError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
} from './docker.errors';

/** An error shaped like the ones docker-modem builds from a daemon answer. */
function httpError(statusCode: number, message: string): Error {
  return Object.assign(new Error(`(HTTP code ${statusCode}) - ${message}`), {
    statusCode,
    json: { message },
  });
}

const never = () => new Promise<never>(() => undefined);

describe('DockerodeClient', () => {
  let dockerode: Dockerode;
  let client: DockerodeClient;
  /** Stands in for `dockerode.getContainer(id)`: only what a test sets exists. */
  let container: Record<string, jest.Mock>;

  beforeAll(() => Logger.overrideLogger(false));
  beforeEach(() => {
    dockerode = new Dockerode({ socketPath: path.join(os.tmpdir(), `no-docker-${process.pid}.sock`) });
    client = new DockerodeClient(dockerode, { callTimeoutMs: 200 });
    container = {};
    jest
      .spyOn(dockerode, 'getContainer')
      .mockImplementation(() => container as unknown as Dockerode.Container);
  });

  it('names its endpoint', () => {
    expect(client.endpoint).toBe(`unix://${path.join(os.tmpdir(), `no-docker-${process.pid}.sock`)}`);
    const tcp = new DockerodeClient(new Dockerode({ host: '127.0.0.1', port: 2375 }));
    expect(tcp.endpoint).toBe('http://127.0.0.1:2375');
  });

  it('an engine that does not answer is DockerUnavailableError, retriable, naming the endpoint and the fix', async () => {
    const err = await client.ping().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DockerUnavailableError);
    expect(err).toMatchObject({
      code: 'DOCKER_UNAVAILABLE',
      retriable: true,
      kind: 'unavailable',
      operation: 'ping',
    });
    expect((err as Error).message).toContain(client.endpoint);
    expect((err as Error).message).toContain('npm run docker:engine');
  });

  it("lists the engine's runtimes and its default from GET /info", async () => {
    jest.spyOn(dockerode, 'info').mockResolvedValue({
      Runtimes: { runsc: { path: '/usr/bin/runsc' }, runc: { path: 'runc' } },
      DefaultRuntime: 'runc',
    });
    await expect(client.runtimes()).resolves.toEqual({ names: ['runc', 'runsc'], defaultRuntime: 'runc' });
    jest.spyOn(dockerode, 'info').mockResolvedValue({});
    await expect(client.runtimes()).resolves.toEqual({ names: [], defaultRuntime: 'runc' });
    jest.spyOn(dockerode, 'info').mockRestore();
    await expect(client.runtimes()).rejects.toBeInstanceOf(DockerUnavailableError);
  });

  describe('ending containers is idempotent', () => {
    it.each([
      [404, 'No such container: c1'],
      [304, ''],
      [409, 'removal of container c1 is already in progress'],
    ])('remove treats %d as done', async (status, message) => {
      container.remove = jest.fn().mockRejectedValue(httpError(status, message));
      await expect(client.remove('c1')).resolves.toBeUndefined();
      expect(container.remove).toHaveBeenCalledWith(expect.objectContaining({ force: true, v: true }));
    });

    it('remove reports other conflicts and server errors', async () => {
      container.remove = jest.fn().mockRejectedValue(httpError(409, 'something else'));
      await expect(client.remove('c1')).rejects.toMatchObject({
        code: 'DOCKER_API',
        statusCode: 409,
        retriable: false,
      });
      container.remove = jest.fn().mockRejectedValue(httpError(500, 'driver failed'));
      await expect(client.remove('c1')).rejects.toMatchObject({ statusCode: 500, retriable: true });
    });

    it.each([404, 409, 304])('kill treats %d as done', async (status) => {
      container.kill = jest.fn().mockRejectedValue(httpError(status, 'not running'));
      await expect(client.kill('c1')).resolves.toBeUndefined();
      expect(container.kill).toHaveBeenCalledWith(expect.objectContaining({ signal: 'SIGKILL' }));
    });

    it('start treats 304 (already started) as done', async () => {
      container.start = jest.fn().mockRejectedValue(httpError(304, ''));
      await expect(client.start('c1')).resolves.toBeUndefined();
    });
  });

  describe('a failed create leaves no container behind', () => {
    const lostReply = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

    it('removes the named container when the daemon may have made it (reply lost, deadline passed)', async () => {
      container.remove = jest.fn().mockResolvedValue(undefined);
      jest.spyOn(dockerode, 'createContainer').mockRejectedValueOnce(lostReply());
      await expect(client.createContainer({ name: 'sy-1', Image: 'i' })).rejects.toBeInstanceOf(
        DockerUnavailableError,
      );
      expect(dockerode.getContainer).toHaveBeenCalledWith('sy-1');
      expect(container.remove).toHaveBeenCalledWith(expect.objectContaining({ force: true }));

      jest.spyOn(dockerode, 'createContainer').mockImplementationOnce(never);
      await expect(client.createContainer({ name: 'sy-2', Image: 'i' })).rejects.toBeInstanceOf(
        DockerTimeoutError,
      );
      expect(dockerode.getContainer).toHaveBeenCalledWith('sy-2');
    });

    it('keeps the create error when that removal fails too', async () => {
      container.remove = jest.fn().mockRejectedValue(lostReply());
      jest.spyOn(dockerode, 'createContainer').mockRejectedValueOnce(lostReply());
      await expect(client.createContainer({ name: 'sy-3', Image: 'i' })).rejects.toMatchObject({
        operation: 'createContainer',
      });
    });

    it('removes nothing when the daemon refused the create or was never reached', async () => {
      container.remove = jest.fn().mockResolvedValue(undefined);
      jest.spyOn(dockerode, 'createContainer').mockRejectedValueOnce(httpError(400, 'bad spec'));
      await expect(client.createContainer({ name: 'sy-4', Image: 'i' })).rejects.toMatchObject({
        statusCode: 400,
      });
      // The real socket of this test does not exist: ENOENT, so the request never left.
      await expect(client.createContainer({ name: 'sy-5', Image: 'i' })).rejects.toBeInstanceOf(
        DockerUnavailableError,
      );
      await expect(client.createContainer({ Image: 'i' })).rejects.toBeInstanceOf(DockerUnavailableError);
      expect(container.remove).not.toHaveBeenCalled();
    });
  });

  it('a missing container is DockerNotFoundError; the daemon’s message is kept', async () => {
    container.inspect = jest.fn().mockRejectedValue(httpError(404, 'No such container: c1'));
    const err = await client.inspect('c1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DockerNotFoundError);
    expect(err).toBeInstanceOf(DockerApiError);
    expect(err).toMatchObject({ code: 'DOCKER_NOT_FOUND', retriable: false });
    expect((err as Error).message).toBe('Docker inspect failed (HTTP 404): No such container: c1');
  });

  it('maps inspect to the state the tiers need', async () => {
    container.inspect = jest.fn().mockResolvedValue({
      Id: 'c1',
      State: { Status: 'exited', Running: false, ExitCode: 137, OOMKilled: true },
      Config: { Labels: { a: 'b' } },
    });
    expect(await client.inspect('c1')).toEqual({
      id: 'c1',
      status: 'exited',
      running: false,
      exitCode: 137,
      oomKilled: true,
      labels: { a: 'b' },
    });
  });

  it('gives up on a call past its deadline, or when the caller’s signal fires', async () => {
    container.inspect = jest.fn().mockImplementation(never);
    await expect(client.inspect('c1')).rejects.toBeInstanceOf(DockerTimeoutError);
    await expect(client.inspect('c1', { timeoutMs: 10 })).rejects.toThrow('took longer than 10 ms');
    const controller = new AbortController();
    const pending = client.inspect('c1', { signal: controller.signal });
    controller.abort();
    await expect(pending).rejects.toMatchObject({ code: 'DOCKER_TIMEOUT', retriable: true });
    await expect(client.inspect('c1', { signal: AbortSignal.abort() })).rejects.toThrow('cancelled');
  });

  it('waits without a deadline unless given one', async () => {
    container.wait = jest
      .fn()
      .mockImplementation(() => new Promise((resolve) => setTimeout(() => resolve({ StatusCode: 7 }), 300)));
    expect(await client.wait('c1')).toEqual({ statusCode: 7 });
    expect(container.wait).toHaveBeenCalledWith(expect.objectContaining({ condition: 'not-running' }));
  });

  it('imageExists is false on 404 only', async () => {
    const inspect = jest.fn();
    jest.spyOn(dockerode, 'getImage').mockReturnValue({ inspect } as unknown as Dockerode.Image);
    inspect.mockResolvedValueOnce({});
    expect(await client.imageExists('img:1')).toBe(true);
    inspect.mockRejectedValueOnce(httpError(404, 'No such image'));
    expect(await client.imageExists('img:1')).toBe(false);
    inspect.mockRejectedValueOnce(httpError(500, 'boom'));
    await expect(client.imageExists('img:1')).rejects.toBeInstanceOf(DockerApiError);
  });

  it('lists every container matching all labels', async () => {
    const list = jest
      .spyOn(dockerode, 'listContainers')
      .mockResolvedValue([
        { Id: 'c1', State: 'running', Labels: { a: 'b', c: 'd' } },
      ] as unknown as Dockerode.ContainerInfo[]);
    expect(await client.listByLabel({ a: 'b', c: true })).toEqual([
      { id: 'c1', state: 'running', labels: { a: 'b', c: 'd' } },
    ]);
    expect(list).toHaveBeenCalledWith(
      expect.objectContaining({ all: true, filters: { label: ['a=b', 'c'] } }),
    );
  });

  it('attach demultiplexes stdout and stderr and passes stdin through', async () => {
    const written: Buffer[] = [];
    const socket = new Duplex({
      read: () => undefined,
      write: (chunk: Buffer, _enc, done) => {
        written.push(chunk);
        done();
      },
    });
    container.attach = jest.fn().mockResolvedValue(socket);
    const streams = await client.attach('c1');
    expect(container.attach).toHaveBeenCalledWith(
      expect.objectContaining({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true }),
    );
    const frame = (stream: number, text: string) => {
      const payload = Buffer.from(text);
      const header = Buffer.alloc(8);
      header.writeUInt8(stream, 0);
      header.writeUInt32BE(payload.length, 4);
      return Buffer.concat([header, payload]);
    };
    const both = Buffer.concat([frame(1, 'out1 '), frame(2, 'err'), frame(1, 'out2')]);
    socket.push(both.subarray(0, 11)); // frames split anywhere
    socket.push(both.subarray(11));
    socket.push(null);
    streams.stdin.end('code+stdin');
    const [out, err] = await Promise.all([text(streams.stdout), text(streams.stderr)]);
    expect(out).toBe('out1 out2');
    expect(err).toBe('err');
    await streams.closed;
    expect(Buffer.concat(written).toString()).toBe('code+stdin');
  });
});

async function text(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString();
}
