import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SwitchyardClient } from './client';
import { connectionError } from './errors';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The JSON-RPC error the engine answered with an HTTP error status (a message out of protocol state: a request
 * before `initialize`, an unknown or ended MCP session), read from the transport's error text, which carries the body.
 */
function engineRpcError(error: StreamableHTTPError): { code: number; message: string } | undefined {
  const body = /^[^{]*(\{.*\})\s*$/s.exec(error.message)?.[1];
  if (body === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    const rpc = isRecord(parsed) && isRecord(parsed.error) ? parsed.error : undefined;
    if (rpc && typeof rpc.code === 'number' && typeof rpc.message === 'string')
      return { code: rpc.code, message: rpc.message };
  } catch {
    /* not the engine's JSON-RPC error: the transport's text is used as it is */
  }
  return undefined;
}

/**
 * The answer to a request the relay could not deliver, so the MCP client is not left waiting, naming what happened:
 * the engine refused the message (its own JSON-RPC error, with the HTTP status), or the engine could not be reached.
 */
export function relayError(
  message: JSONRPCMessage,
  error: unknown,
  baseUrl: string,
): JSONRPCMessage | undefined {
  if (!('id' in message) || !('method' in message)) return undefined;
  let answer: { code: number; message: string };
  if (error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0) {
    const rpc = engineRpcError(error);
    answer = {
      code: rpc?.code ?? -32600,
      message: `switchyard engine refused ${message.method} (HTTP ${error.code}): ${rpc?.message ?? error.message}`,
    };
  } else if (error instanceof TypeError) {
    // fetch's own failure: nothing answered at the URL.
    answer = {
      code: -32000,
      message: `switchyard engine unreachable: ${connectionError(baseUrl, error).message}`,
    };
  } else {
    answer = {
      code: -32603,
      message: `switchyard mcp relay: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  return { jsonrpc: '2.0', id: message.id, error: answer };
}

/**
 * Relays MCP between stdio (the MCP client that launched us) and the engine's Streamable HTTP endpoint, message
 * by message: the engine does all the MCP work, this only carries JSON-RPC both ways. Resolves with the exit code
 * once stdin closes.
 */
export async function relayMcp(client: SwitchyardClient): Promise<number> {
  const local = new StdioServerTransport();
  const remote = new StreamableHTTPClientTransport(new URL(`${client.baseUrl}/mcp`), {
    requestInit: { headers: client.authHeaders() },
  });
  const done = new Promise<number>((resolve) => {
    let closing = false;
    const close = (code: number) => {
      if (closing) return;
      closing = true;
      // Ends the engine's MCP session too; a failure here changes nothing for the caller.
      void remote
        .terminateSession()
        .catch(() => undefined)
        .finally(() => {
          void Promise.allSettled([remote.close(), local.close()]).then(() => resolve(code));
        });
    };
    process.stdin.once('end', () => close(0));
    local.onclose = () => close(0);
  });
  remote.onerror = (error) => process.stderr.write(`switchyard mcp: ${error.message}\n`);
  local.onerror = (error) => process.stderr.write(`switchyard mcp: ${error.message}\n`);
  remote.onmessage = (message) => {
    local.send(message).catch((error: unknown) => local.onerror?.(error as Error));
  };
  local.onmessage = (message) => {
    remote.send(message).catch((error: unknown) => {
      const answer = relayError(message, error, client.baseUrl);
      if (answer) void local.send(answer);
      else
        process.stderr.write(`switchyard mcp: ${error instanceof Error ? error.message : String(error)}\n`);
    });
  };
  await remote.start();
  await local.start();
  return done;
}
