import { out, parse, table, UsageError } from './cli-common';
import type { SwitchyardClient } from './client';

export const CHECKPOINTS_HELP = `usage: switchyard checkpoints create SID [--label TEXT] [--json]
       switchyard checkpoints list SID [--json]
       switchyard checkpoints restore SID CHECKPOINT
       switchyard checkpoints diff SID CHECKPOINT [--to CHECKPOINT] [--json]

create checkpoints the session's workspace as it is now and prints its id; list prints them, oldest first (ls
works too); restore puts the workspace back as it was at one; diff prints what changed since one (A added,
D removed, M modified, with the unified diff of text files) to the workspace now or to another checkpoint (--to).
`;

export async function checkpoints(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    label: { type: 'string' },
    to: { type: 'string' },
    json: { type: 'boolean' },
  });
  const [sub, sid, checkpointId, ...extra] = positionals;
  if (sid === undefined || extra.length > 0) throw new UsageError('expected "checkpoints COMMAND SID …"');
  const json = (value: unknown) => out(`${JSON.stringify(value, null, 2)}\n`);
  if (sub === 'create' && checkpointId === undefined) {
    const created = await client.checkpoints.create(
      sid,
      values.label === undefined ? {} : { label: values.label },
    );
    if (values.json) json(created);
    else out(`${created.id}\n`);
    return 0;
  }
  if ((sub === 'list' || sub === 'ls') && checkpointId === undefined) {
    const list = await client.checkpoints.list(sid);
    if (values.json) json(list);
    else
      out(
        table(
          ['ID', 'CREATED', 'FILES', 'BYTES', 'LABEL'],
          list.map((c) => [
            c.id,
            c.createdAt,
            String(c.files),
            String(c.bytes),
            c.label ?? (c.auto ? '(auto)' : ''),
          ]),
        ),
      );
    return 0;
  }
  if (sub === 'restore' && checkpointId !== undefined) {
    const restored = await client.checkpoints.restore(sid, checkpointId);
    const r = restored.restored;
    out(`restored ${checkpointId}: ${r.copied} written back, ${r.removed} removed, ${r.kept} kept\n`);
    if (restored.note) out(`${restored.note}\n`);
    return 0;
  }
  if (sub === 'diff' && checkpointId !== undefined) {
    const diff = await client.checkpoints.diff(sid, checkpointId, values.to);
    if (values.json) {
      json(diff);
      return 0;
    }
    for (const a of diff.added) out(`A ${a.path}${a.type === 'dir' ? '/' : ''}\n`);
    for (const d of diff.removed) out(`D ${d.path}${d.type === 'dir' ? '/' : ''}\n`);
    for (const m of diff.modified) out(`M ${m.path}\n${m.diff ? `${m.diff.replace(/\n?$/, '\n')}` : ''}`);
    return 0;
  }
  throw new UsageError(`unknown or incomplete checkpoints command: ${sub ?? ''}`);
}
