import { out, parse, table, UsageError } from './cli-common';
import type { SwitchyardClient } from './client';

export const KERNELS_HELP = `usage: switchyard kernels ls SID [--json]
       switchyard kernels restart SID KERNEL
       switchyard kernels interrupt SID KERNEL
       switchyard kernels rm SID KERNEL

The session's kernels (the interpreters "exec --state session" runs cells in): ls lists them; restart gives one a
fresh interpreter (its state cleared); interrupt stops the cell it is running (SIGINT), keeping its state; rm shuts it
down.
`;

export async function kernels(client: SwitchyardClient, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { json: { type: 'boolean' } });
  const [sub, sid, kernelId, ...extra] = positionals;
  if (sid === undefined || extra.length > 0)
    throw new UsageError('expected "kernels ls SID" or "kernels OP SID KERNEL"');
  if (sub === 'ls' && kernelId === undefined) {
    const list = await client.kernels.list(sid);
    if (values.json) out(`${JSON.stringify(list, null, 2)}\n`);
    else
      out(
        table(
          ['ID', 'LANGUAGE', 'TIER', 'BUSY', 'CELLS', 'LAST USED'],
          list.map((k) => [
            k.id,
            k.language,
            k.tier,
            k.busy ? 'yes' : 'no',
            String(k.executionCount),
            k.lastUsedAt,
          ]),
        ),
      );
    return 0;
  }
  if (kernelId === undefined) throw new UsageError(`"kernels ${sub ?? ''}" needs SID and KERNEL`);
  switch (sub) {
    case 'restart':
      out(`${JSON.stringify(await client.kernels.restart(sid, kernelId), null, 2)}\n`);
      return 0;
    case 'interrupt':
      out(`${JSON.stringify(await client.kernels.interrupt(sid, kernelId), null, 2)}\n`);
      return 0;
    case 'rm':
      await client.kernels.delete(sid, kernelId);
      return 0;
    default:
      throw new UsageError(`unknown kernels command: ${sub ?? ''}`);
  }
}
