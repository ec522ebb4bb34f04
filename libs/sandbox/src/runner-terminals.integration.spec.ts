/**
 * Runner protocol 5's terminals for real: shells on pseudo-terminals in a bubblewrap box (the runner's own pid
 * namespace, as in the subprocess tier), driven through `RunnerConnection`: the window size and its change, ^C, a
 * full-screen program, exit status and hang-up; then the same shell in the real sandbox image through Docker.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  BOX_ENV,
  eventually,
  requireBubblewrap,
  type RunnerBox,
  sandboxImage,
  startRunnerBox,
  startRunnerContainer,
  stopRunnerBox,
} from '../test/runner-box';
import type { TermExitEvent, TermOpenRequest } from './core/runner/runner-protocol';

requireBubblewrap();

const ENV = { ...BOX_ENV, TERM: 'xterm-256color' };

// A full-screen program that is in every sandbox image (python3's curses; the image has no vim or less).
const CURSES_APP = String.raw`
import curses
def main(win):
    h, w = win.getmaxyx()
    win.addstr(h // 2, 4, "FULL SCREEN %dx%d" % (w, h))
    win.refresh()
    return win.getkey()
print("pressed", curses.wrapper(main))
`;

let next = 0;

/** Opens a terminal; `screen(re)` resolves with all it wrote once `re` matches it, `exit` with its end. */
async function openTerm(box: RunnerBox, options: Partial<TermOpenRequest> = {}) {
  const term = `trm_${++next}`;
  const { pid } = await box.connection.termOpen({
    term,
    cols: 80,
    rows: 24,
    env: ENV,
    cwd: '',
    workspace: box.workspace,
    ...options,
  });
  const output = () =>
    Buffer.concat(box.events.flatMap((e) => (e.ev === 'tout' && e.term === term ? [e.data] : []))).toString(
      'utf8',
    );
  return {
    term,
    pid,
    output,
    type: (text: string) => box.connection.termWrite(term, Buffer.from(text)),
    screen: (re: RegExp) => eventually(() => (re.test(output()) ? output() : undefined)),
    exit: () =>
      eventually(() => box.events.find((e): e is TermExitEvent => e.ev === 'texit' && e.term === term)),
  };
}

describe('runner terminals (protocol 5) in a bubblewrap box', () => {
  let box: RunnerBox;
  const open = (options?: Partial<TermOpenRequest>) => openTerm(box, options);

  beforeAll(async () => {
    box = startRunnerBox();
    await box.connection.hello;
    fs.writeFileSync(path.join(box.dir, 'app.py'), CURSES_APP);
  });

  afterAll(() => stopRunnerBox(box));

  it('runs a command at the window size it was opened with, and reports its exit status', async () => {
    const t = await open({ cols: 100, rows: 30, command: 'stty size; tput cols; exit 3' });
    expect(t.pid).toBeGreaterThan(1);
    await expect(t.exit()).resolves.toEqual({ ev: 'texit', term: t.term, exitCode: 3, signal: null });
    // Its output was all sent before its end.
    expect(t.output()).toBe('30 100\r\n100\r\n');
  });

  it('gives a login shell the new size after a resize', async () => {
    const t = await open();
    await expect(box.connection.termResize(t.term, 132, 43)).resolves.toEqual({ found: true });
    await t.type('echo "cols=$(tput cols) lines=$(tput lines)"\r');
    expect(await t.screen(/cols=\d+ lines=\d+\r\n/)).toContain('cols=132 lines=43');
    await t.type('exit 0\r');
    await expect(t.exit()).resolves.toMatchObject({ exitCode: 0, signal: null });
  });

  it('interrupts the foreground command with ^C, and the shell goes on', async () => {
    const t = await open();
    // The job says it runs: then it is the terminal's foreground job, which the ^C byte interrupts.
    await t.type("sh -c 'echo sleeping-$((6*7)); exec sleep 100'\r");
    await t.screen(/sleeping-42\r\n/);
    await t.type('\x03');
    await t.type('echo "status=$?"\r');
    expect(await t.screen(/status=\d+\r\n/)).toContain('status=130');
    await box.connection.termClose(t.term);
    await expect(t.exit()).resolves.toMatchObject({ exitCode: null, signal: 'SIGHUP' });
  });

  it('draws a full-screen program on the alternate screen and reads its keys', async () => {
    const t = await open({ cols: 90, rows: 20, command: 'python3 app.py' });
    const drawn = await t.screen(/FULL SCREEN 90x20/);
    expect(drawn).toContain('\x1b[?1049h'); // xterm's alternate screen
    expect(drawn).toContain('\x1b[11;5H'); // row 10, column 4 (1-based on the wire)
    await t.type('q');
    await expect(t.exit()).resolves.toMatchObject({ exitCode: 0 });
    expect(t.output()).toContain('\x1b[?1049l'); // back to the normal screen
    expect(t.output()).toMatch(/pressed q\r\n$/);
  });

  it('runs top full-screen and quits it with q', async () => {
    const t = await open({ command: 'top -d 0.2' });
    // It takes the whole screen its own way (cursor hidden, screen cleared); at each refresh it moves home and
    // redraws what changed (the CPU line always does).
    const drawn = await t.screen(/Tasks:[\s\S]*%Cpu[\s\S]*%Cpu/);
    expect(drawn.startsWith('\x1b[?1h\x1b=\x1b[?25l\x1b[H\x1b[2J')).toBe(true);
    expect(drawn.split('\x1b[H').length).toBeGreaterThan(2);
    await t.type('q');
    await expect(t.exit()).resolves.toMatchObject({ exitCode: 0 });
  });

  it('answers found: false for a terminal that ended', async () => {
    const t = await open({ command: 'true' });
    await t.exit();
    await expect(t.type('x')).resolves.toEqual({ found: false });
    await expect(box.connection.termResize(t.term, 10, 10)).resolves.toEqual({ found: false });
    await expect(box.connection.termClose(t.term)).resolves.toEqual({ found: false });
  });
});

describe('runner terminals (protocol 5) in the sandbox image', () => {
  let box: RunnerBox;
  const open = (options?: Partial<TermOpenRequest>) => openTerm(box, options);

  beforeAll(async () => {
    box = startRunnerContainer(sandboxImage(), `switchyard-runner-it-${randomBytes(4).toString('hex')}`);
    await box.connection.hello;
    fs.writeFileSync(path.join(box.dir, 'app.py'), CURSES_APP);
  });

  afterAll(() => stopRunnerBox(box));

  it('runs a login shell that follows resizes, takes ^C and draws full-screen', async () => {
    const t = await open({ cols: 100, rows: 30 });
    await t.type('stty size\r');
    await t.screen(/30 100\r\n/);
    await box.connection.termResize(t.term, 120, 40);
    await t.type('echo "cols=$(tput cols)"\r');
    expect(await t.screen(/cols=\d+\r\n/)).toContain('cols=120');
    await t.type("sh -c 'echo sleeping-$((6*7)); exec sleep 100'\r");
    await t.screen(/sleeping-42\r\n/);
    await t.type('\x03');
    await t.type('echo "status=$?"\r');
    expect(await t.screen(/status=\d+\r\n/)).toContain('status=130');
    await t.type('python3 app.py\r');
    expect(await t.screen(/FULL SCREEN 120x40/)).toContain('\x1b[?1049h');
    await t.type('q');
    await t.screen(/pressed q\r\n/);
    await t.type('exit 7\r');
    await expect(t.exit()).resolves.toMatchObject({ exitCode: 7, signal: null });
  });
});
