import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { SwitchyardClient } from './client';

/** A request the engine could not be reached for: answered locally, so the MCP client is not left waiting. */
function unreachable(message: JSONRPCMessage, error: unknown): JSONRPCMessage | undefined {
  if (!('id' in message) || !('method' in message)) return undefined;
  return {
    jsonrpc: '2.0',
    id: message.id,
    error: {
      code: -32000,
      message: `switchyard engine unreachable: ${error instanceof Error ? error.message : String(error)}`,
    },
  };
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
      const answer = unreachable(message, error);
      if (answer) void local.send(answer);
      else
        process.stderr.write(`switchyard mcp: ${error instanceof Error ? error.message : String(error)}\n`);
    });
  };
  await remote.start();
  await local.start();
  return done;
}
