/**
 * The live parts of a session the console watches: its terminals, its listening ports and their preview links,
 * through the typed client (the ports through its generic `request`, with the same auth and errors, until it has
 * methods of its own for them).
 */
import type { OpenedTerminal, Terminal, TerminalAwaitingApproval } from '../../../packages/client/src/types';
import { client } from './api';

const enc = encodeURIComponent;
const sessionPath = (sessionId: string) => `/v1/sessions/${enc(sessionId)}`;

/** One listening port of the session, as `GET …/ports` answers it. */
export interface PortInfo {
  port: number;
  address: string;
  tier?: string;
  process: { id: string; name?: string } | null;
  url?: string;
}

export interface Preview {
  url: string;
  token: string;
  expiresAt: string;
  host?: string;
}

/** A terminal as the pane holds it: as listed, or as opened (then with the token its WebSocket takes). */
export type TerminalInfo = Terminal & { token?: string };

export function openTerminal(
  sessionId: string,
  size: { cols: number; rows: number },
): Promise<OpenedTerminal | TerminalAwaitingApproval> {
  return client().terminals.open(sessionId, size);
}

export function listTerminals(sessionId: string): Promise<Terminal[]> {
  return client().terminals.list(sessionId);
}

export async function terminalToken(sessionId: string, terminalId: string): Promise<string> {
  return (await client().terminals.token(sessionId, terminalId)).token;
}

export async function closeTerminal(sessionId: string, terminalId: string): Promise<void> {
  await client().terminals.close(sessionId, terminalId);
}

/**
 * Where a browser attaches to a terminal: its WebSocket on this page's own origin (the page's policy allows no
 * other), with a short-lived token as `?token=`, since a browser's WebSocket cannot carry an Authorization header.
 */
export function terminalSocketUrl(sessionId: string, terminal: Terminal, token: string): string {
  const wsPath = terminal.wsPath ?? `${sessionPath(sessionId)}/terminals/${enc(terminal.id)}/ws`;
  return client().terminals.wsUrl({ wsPath }, token);
}

export async function listPorts(sessionId: string): Promise<PortInfo[]> {
  return (await client().request<{ ports: PortInfo[] }>('GET', `${sessionPath(sessionId)}/ports`)).ports;
}

/**
 * Where a preview opens: its own origin (`host`, a preview domain) when the engine has one, else the path through
 * the engine's proxy on the engine's origin; absolute either way.
 */
export function previewHref(preview: Preview): string {
  if (preview.host) {
    return `${location.protocol}//${preview.host}/?switchyard_token=${encodeURIComponent(preview.token)}`;
  }
  return new URL(preview.url, location.origin).href;
}

/** A link to the port through the engine's proxy that a new tab can open without the API key. */
export function previewPort(sessionId: string, port: number, ttlSeconds: number): Promise<Preview> {
  return client().request<Preview>('POST', `${sessionPath(sessionId)}/ports/${port}/preview`, {
    body: { ttlSeconds },
  });
}
