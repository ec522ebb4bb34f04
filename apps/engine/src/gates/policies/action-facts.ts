import { requestUrl } from '@switchyard/browser';
import type { ActionRequest, ProcessActionRequest } from '../../state/actions/action-request';
import type { PolicyFacts } from '../../state/policies/policy.types';

/** File ops offered as tools under their own names (the rest are `file_<op>`). */
const FILE_TOOLS: Readonly<Record<string, string>> = {
  read: 'read',
  write: 'write',
  edit: 'edit',
  list: 'ls',
  find: 'find',
  grep: 'grep',
};

const MAX_HOSTS = 32;
/** A URL's host (`scheme://host`), or an scp-like git remote's (`git@host:path`). */
const URL_HOST = /\b(?:https?|wss?|ftp|git|ssh):\/\/(?:[^@/\s'"`<>]*@)?(\[[^\]\s]+\]|[^/\s:'"`<>?#]+)/gi;
const SCP_HOST = /\bgit@([a-z0-9.-]+):/gi;

/** Hosts named in text (code, a command line), lowercased, each once. */
export function hostsIn(text: string): string[] {
  const hosts = new Set<string>();
  for (const re of [URL_HOST, SCP_HOST]) {
    for (const m of text.matchAll(re)) {
      hosts.add(m[1].toLowerCase().replace(/\.$/, ''));
      if (hosts.size >= MAX_HOSTS) return [...hosts];
    }
  }
  return [...hosts];
}

function hostOf(url: string | undefined): string[] {
  if (url === undefined) return [];
  try {
    const host = new URL(url).hostname.toLowerCase();
    return host ? [host] : [];
  } catch {
    return [];
  }
}

/**
 * The process ops whose text a shell runs: a `start`'s command, a `write`'s stdin. They are bash code to policies (a
 * `language: bash` rule matches them) as they are to risk scoring (the process handler scores them as bash).
 */
export const SHELL_PROCESS_OPS: ReadonlySet<string> = new Set(['start', 'write']);

/** The shell text of a process op (see `SHELL_PROCESS_OPS`), or undefined for an op that runs none. */
function shellTextOf(request: ProcessActionRequest): string | undefined {
  switch (request.op) {
    case 'start':
      return request.command;
    case 'write':
      return request.data;
    case 'list':
    case 'logs':
    case 'signal':
    case 'stop':
    case 'wait':
      return undefined;
  }
}

/** The name of the tool that runs a request, or `<type>_<op>` for an op no tool offers. */
export function toolNameOf(request: ActionRequest): string {
  switch (request.type) {
    case 'code':
      return request.language;
    case 'file':
      return FILE_TOOLS[request.op] ?? `file_${request.op}`;
    case 'browser':
      return `browser_${request.op}`;
    case 'process':
      return `process_${request.op}`;
    case 'kernel':
      return `kernel_${request.op}`;
    case 'skill':
      return request.name;
    case 'terminal':
      // Opening one is running bash as a person types it; its close runs nothing.
      return request.op === 'open' ? 'terminal' : 'terminal_close';
  }
}

/** What a policy rule can match of a request, once routed (its tier and risk). */
export function actionFacts(
  request: ActionRequest,
  routed: { tier?: string; risk?: { level: string }; language?: string },
): PolicyFacts {
  const common = {
    tool: toolNameOf(request),
    type: request.type,
    ...(routed.tier !== undefined && { tier: routed.tier }),
    ...(routed.risk !== undefined && { risk: routed.risk.level }),
  };
  switch (request.type) {
    case 'code':
      return { ...common, language: request.language, hosts: hostsIn(request.code) };
    case 'file':
      return { ...common, op: request.op, hosts: [] };
    case 'browser':
      return { ...common, op: request.op, hosts: hostOf(requestUrl(request)) };
    case 'process': {
      const shell = shellTextOf(request);
      if (shell === undefined) return { ...common, op: request.op, hosts: [] };
      return { ...common, op: request.op, language: 'bash', hosts: hostsIn(shell) };
    }
    case 'kernel':
      return { ...common, op: request.op, language: request.language, hosts: [] };
    case 'skill':
      return { ...common, ...(routed.language !== undefined && { language: routed.language }), hosts: [] };
    case 'terminal':
      // A terminal is bash: a `language: bash` rule matches its opening (and its command's hosts count).
      if (request.op === 'open')
        return { ...common, op: 'open', language: 'bash', hosts: hostsIn(request.command ?? '') };
      return { ...common, op: request.op, hosts: [] };
  }
}
