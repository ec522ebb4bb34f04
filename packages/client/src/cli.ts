import { readFileSync } from 'node:fs';
import { CHECKPOINTS_HELP, checkpoints } from './cli-checkpoints';
import { err, out, parse, readStdin, stdinIsGiven, table, UsageError, withSession } from './cli-common';
import { FILES_HELP, files } from './cli-files';
import { KERNELS_HELP, kernels } from './cli-kernels';
import { SwitchyardClient } from './client';
import { graphToDot } from './dot';
import { SwitchyardError } from './errors';
import type { Action, CreatePlanRequest, Plan, SessionEvent } from './types';

const USAGE = `usage: switchyard <command> [options]

commands:
  exec <python|bash|node> (-c CODE | FILE) [--session SID] [--state session]
                                                              run code (stdin piped to it), exit with its exit code
  sessions ls [--json] | sessions rm SID                      list or delete sessions
  files cp SRC DST | files ls SID [PATH] | files cat SID PATH  copy files and directories in and out (SID:PATH)
  kernels ls SID | kernels restart|interrupt|rm SID KERNEL    a session's kernels
  checkpoints create|list|restore|diff SID [CHECKPOINT]       a session's checkpoints
  actions ls SID [--json]                                     a session's actions, oldest first
  events SID [--json]                                         tail a session's events until Ctrl-C
  graph SID (--json | --dot)                                  a session's context graph
  plan run FILE [--session SID]                               run a plan (JSON) and follow it
  tools [--format openai|anthropic] [--strict]                the tool catalog
  mcp                                                         MCP over stdio, relayed to the engine's /mcp

environment: SWITCHYARD_URL (default http://127.0.0.1:8080), SWITCHYARD_API_KEY
"switchyard <command> --help" describes one command.
`;

const HELP: Record<string, string> = {
  exec: `usage: switchyard exec <python|bash|node> (-c CODE | FILE) [--session SID] [--state fresh|session]
                      [--stdin] [--timeout MS]

Runs the code as one action and prints its stdout and stderr to this process's. Exits with the action's exit
code; a denied, timed-out or failed-to-start action prints the reason on stderr and exits non-zero. Without
--session it creates a session for the run and deletes it afterwards.

When stdin is a pipe or a file ("echo hi | switchyard exec python in.py", "< in.txt"), it is the program's stdin
(the code action's "stdin" field). A terminal, or a socket a parent process left open, is read only with --stdin.

--state session runs the code as a cell of the session's kernel for the language, whose variables and imports
stay for the next run; it prints the cell's value after its output. A kernel reads no stdin: piping input to it is
refused.
`,
  files: FILES_HELP,
  kernels: KERNELS_HELP,
  checkpoints: CHECKPOINTS_HELP,
  sessions: `usage: switchyard sessions ls [--json]
       switchyard sessions rm SID

ls prints one session a line (id, created, expires, metadata); rm deletes a session and its workspace.
`,
  actions: `usage: switchyard actions ls SID [--json]

Prints the session's actions, oldest first: sequence, id, type, status, exit code, summary of the input.
`,
  events: `usage: switchyard events SID [--json]

Prints the session's events as they come, one a line, until Ctrl-C or the end of the session. Reconnects with
Last-Event-ID when the connection drops. --json prints each event as a JSON object.
`,
  graph: `usage: switchyard graph SID (--json | --dot)

Prints the session's context graph: the engine's JSON, or Graphviz DOT (pipe to "dot -Tsvg").
`,
  plan: `usage: switchyard plan run FILE [--session SID]

Submits the plan in FILE (the JSON body of POST /v1/sessions/:id/plans) and prints each step's progress until
the plan ends. Exits 0 only if it succeeded. Without --session it runs in a new session, deleted afterwards.
`,
  tools: `usage: switchyard tools [--format openai|anthropic] [--strict]

Prints the tool catalog as JSON, in the shape the model API takes; --strict (OpenAI only) for strict mode.
`,
  mcp: `usage: switchyard mcp

Speaks MCP over stdin/stdout and relays every message to the engine's Streamable HTTP endpoint
(SWITCHYARD_URL/mcp), with SWITCHYARD_API_KEY as bearer token. For MCP clients that only launch stdio servers.
`,
};

export { table };

/** Runs the CLI; resolves to the exit code. */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      (command === undefined ? err : out)(USAGE);
      return command === undefined ? 2 : 0;
    }
    if (!(command in HELP)) throw new UsageError(`unknown command: ${command}`);
    if (rest.includes('--help') || rest.includes('-h')) {
      out(HELP[command]);
      return 0;
    }
    const client = new SwitchyardClient();
    switch (command) {
      case 'exec':
        return await exec(client, rest);
      case 'sessions':
        return await sessions(client, rest);
      case 'actions':
        return await actions(client, rest);
      case 'events':
        return await events(client, rest);
      case 'graph':
        return await graph(client, rest);
      case 'plan':
        return await plan(client, rest);
      case 'tools':
        return await tools(client, rest);
      case 'files':
        return await files(client, rest);
      case 'kernels':
        return await kernels(client, rest);
      case 'checkpoints':
        return await checkpoints(client, rest);
      case 'mcp': {
        parse(rest, {});
        const { relayMcp } = await import('./mcp-relay');
        return await relayMcp(client);
      }
      default:
        throw new UsageError(`unknown command: ${command}`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      err(
        `switchyard: ${error.message}\n\n${command !== undefined && command in HELP ? HELP[command] : USAGE}`,
      );
      return 2;
    }
    if (error instanceof SwitchyardError) {
      const fields = error.fields.map((f) => `\n  ${f.path}: ${f.message}`).join('');
      err(`switchyard: ${error.status ? `${error.status} ${error.code}: ` : ''}${error.message}${fields}\n`);
      return 1;
    }
    throw error;
  }
}

const LANGUAGES = new Set(['python', 'bash', 'node']);
/** What the CLI reads of a piped stdin at most; the engine has its own cap (400 naming `stdin` past it). */
const STDIN_MAX_BYTES = 64 * 1024 * 1024;

async function exec(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    c: { type: 'string', short: 'c' },
    session: { type: 'string' },
    state: { type: 'string' },
    stdin: { type: 'boolean' },
    timeout: { type: 'string' },
  });
  const [language, file, ...extra] = positionals;
  if (language === undefined || !LANGUAGES.has(language))
    throw new UsageError('exec needs a language: python, bash or node');
  if ((values.c === undefined) === (file === undefined) || extra.length > 0)
    throw new UsageError('exec needs either -c CODE or one FILE');
  const timeoutMs = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutMs !== undefined && !Number.isInteger(timeoutMs))
    throw new UsageError('--timeout takes milliseconds');
  const state = values.state;
  if (state !== undefined && state !== 'fresh' && state !== 'session')
    throw new UsageError('--state is fresh or session');
  const code = values.c ?? readFileSync(file, 'utf8');
  const stdin = values.stdin || stdinIsGiven() ? await readStdin(STDIN_MAX_BYTES) : '';
  if (stdin !== '' && state === 'session')
    throw new UsageError('a kernel reads no stdin: with --state session, write the input to a file first');
  return withSession(client, values.session, async (sessionId) => {
    const action = await client.actions.run(sessionId, {
      type: 'code',
      language: language as 'python' | 'bash' | 'node',
      code,
      ...(stdin !== '' && { stdin }),
      ...(state !== undefined && { state }),
      ...(timeoutMs !== undefined && { timeoutMs }),
    });
    if (action.stdout) out(action.stdout);
    if (action.stderr) err(action.stderr);
    const value = action.output && 'kernel' in action.output ? action.output.result : undefined;
    if (value !== undefined) out(`${value}\n`);
    return exitCodeOf(action);
  });
}

/** The process exit code an action's outcome maps to. */
export function exitCodeOf(action: Action): number {
  if (action.status === 'succeeded') return action.exitCode ?? 0;
  if (action.status === 'failed' && action.exitCode !== undefined && action.exitCode !== 0)
    return action.exitCode;
  const reasons = action.error?.message ?? action.risk?.reasons.join('; ') ?? '';
  err(`switchyard: action ${action.status}${reasons ? `: ${reasons}` : ''}\n`);
  return action.status === 'timed_out' ? 124 : 1;
}

async function sessions(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } });
  const [sub, sid, ...extra] = positionals;
  if (sub === 'ls' && sid === undefined) {
    const list = await client.sessions.list();
    if (values.json) out(`${JSON.stringify(list, null, 2)}\n`);
    else
      out(
        table(
          ['ID', 'CREATED', 'EXPIRES', 'METADATA'],
          list.map((s) => [s.id, s.createdAt, s.expiresAt, JSON.stringify(s.metadata)]),
        ),
      );
    return 0;
  }
  if (sub === 'rm' && sid !== undefined && extra.length === 0) {
    await client.sessions.delete(sid);
    return 0;
  }
  throw new UsageError('expected "sessions ls" or "sessions rm SID"');
}

async function actions(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } });
  if (positionals[0] !== 'ls' || positionals.length !== 2) throw new UsageError('expected "actions ls SID"');
  const all: Action[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.actions.list(positionals[1], { cursor, limit: 1000 });
    all.push(...page.actions);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  if (values.json) out(`${JSON.stringify(all, null, 2)}\n`);
  else
    out(
      table(
        ['SEQ', 'ID', 'TYPE', 'STATUS', 'EXIT', 'INPUT'],
        all.map((a) => [
          String(a.seq ?? ''),
          a.id,
          a.type,
          a.status,
          a.exitCode === undefined ? '' : String(a.exitCode),
          a.inputSummary ?? '',
        ]),
      ),
    );
  return 0;
}

async function events(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } });
  if (positionals.length !== 1) throw new UsageError('expected "events SID"');
  const abort = new AbortController();
  const stop = () => abort.abort();
  process.once('SIGINT', stop);
  try {
    for await (const event of client.events(positionals[0], { signal: abort.signal }))
      out(values.json ? `${JSON.stringify(event)}\n` : `${eventLine(event)}\n`);
  } finally {
    process.removeListener('SIGINT', stop);
  }
  return 0;
}

/** One readable line for an event: id, type, then what it is about. */
export function eventLine(event: SessionEvent): string {
  const d = event.data;
  const parts = [event.id === undefined ? '-' : String(event.id), event.type];
  for (const key of [
    'actionId',
    'planId',
    'stepId',
    'kernelId',
    'processId',
    'checkpointId',
    'status',
    'exitCode',
  ])
    if (d[key] !== undefined)
      parts.push(`${key}=${typeof d[key] === 'string' ? d[key] : JSON.stringify(d[key])}`);
  if (typeof d.chunk === 'string')
    parts.push(`${typeof d.stream === 'string' ? d.stream : 'output'}: ${JSON.stringify(d.chunk)}`);
  return parts.join(' ');
}

async function graph(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' }, dot: { type: 'boolean' } });
  if (positionals.length !== 1 || values.json === values.dot)
    throw new UsageError('expected "graph SID --json" or "graph SID --dot"');
  const g = await client.graph.get(positionals[0]);
  out(values.dot ? graphToDot(g, positionals[0]) : `${JSON.stringify(g, null, 2)}\n`);
  return 0;
}

async function plan(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { session: { type: 'string' } });
  if (positionals[0] !== 'run' || positionals.length !== 2) throw new UsageError('expected "plan run FILE"');
  let spec: CreatePlanRequest;
  try {
    spec = JSON.parse(readFileSync(positionals[1], 'utf8')) as CreatePlanRequest;
  } catch (error) {
    throw new UsageError(`cannot read the plan: ${error instanceof Error ? error.message : String(error)}`);
  }
  return withSession(client, values.session, async (sessionId) => {
    const submitted = await client.plans.create(sessionId, { ...spec, wait: false });
    err(`plan ${submitted.id} in session ${sessionId}: ${submitted.status}\n`);
    const seen = new Map<string, string>();
    const progress = (p: Plan) => {
      for (const step of p.steps) {
        const state = `${step.status}/${step.attempts.length}`;
        if (seen.get(step.id) === state) continue;
        seen.set(step.id, state);
        const attempt = step.attempts.at(-1);
        out(
          `step ${step.id}: ${step.status}` +
            (step.attempts.length > 1 ? ` (attempt ${step.attempts.length})` : '') +
            (attempt?.actionId ? ` ${attempt.actionId}` : '') +
            (step.reason ? ` - ${step.reason}` : '') +
            '\n',
        );
      }
    };
    progress(submitted);
    const final = await client.plans.waitFor(sessionId, submitted.id, { onProgress: progress });
    out(
      `plan ${final.id}: ${final.status}${final.failedStep ? ` (failed step: ${final.failedStep})` : ''}\n`,
    );
    return final.status === 'succeeded' ? 0 : 1;
  });
}

async function tools(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { format: { type: 'string' }, strict: { type: 'boolean' } });
  if (positionals.length > 0) throw new UsageError(`unexpected argument: ${positionals[0]}`);
  const format = values.format;
  if (format !== undefined && format !== 'openai' && format !== 'anthropic')
    throw new UsageError('--format is openai or anthropic');
  out(`${JSON.stringify(await client.tools.list({ format, strict: values.strict }), null, 2)}\n`);
  return 0;
}
