import * as fs from 'node:fs';
import { CommandError, runCommand } from './run-command';
import { sharedSpawner } from './spawner';

/** Field 4 of /proc/<pid>/stat: the parent pid. */
function parentOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

describe('runCommand (real processes, through the shared spawner)', () => {
  afterAll(() => sharedSpawner().release());

  it("resolves with what the command printed, found on the environment's PATH, run by the spawner", async () => {
    const { stdout, stderr } = await runCommand('sh', ['-c', 'echo "$PPID $X"; echo warn >&2'], {
      env: { PATH: '/usr/bin:/bin', X: 'only-this' },
    });
    const [parent, x] = stdout.trim().split(' ');
    expect(x).toBe('only-this');
    expect(stderr).toBe('warn\n');
    expect(Number(parent)).toBe(sharedSpawner().pid);
    expect(Number(parent)).not.toBe(process.pid);
    expect(parentOf(Number(parent))).toBe(process.pid);
  });

  it('rejects with the exit code and what the command printed', async () => {
    const err = await runCommand('sh', ['-c', 'echo out; echo "bad thing" >&2; exit 3']).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CommandError);
    expect(err).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'bad thing\n' });
    expect((err as Error).message).toBe(
      `Command failed: sh -c echo out; echo "bad thing" >&2; exit 3: exit code 3`,
    );
  });

  it('rejects a command that is not there, naming why', async () => {
    const err = await runCommand('no-such-command-here', []).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandError);
    expect((err as Error).message).toMatch(
      /^Command failed: no-such-command-here : spawn no-such-command-here ENOENT$/,
    );
  });

  it('kills a command that outlives its timeout, with its process group', async () => {
    const err = await runCommand('sh', ['-c', 'sleep 30 & sleep 30'], { timeoutMs: 200 }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(CommandError);
    expect((err as Error).message).toMatch(/timed out after 200 ms$/);
    expect((err as CommandError).exitCode).toBeNull();
  });
});
