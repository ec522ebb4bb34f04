import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { relayError } from './mcp-relay';

const request = { jsonrpc: '2.0' as const, id: 3, method: 'tools/list' };

describe('relayError: the answer to a request `switchyard mcp` could not deliver', () => {
  it("names a refusal by the engine with its status and the engine's own JSON-RPC error", () => {
    const body =
      '{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}';
    const answer = relayError(
      request,
      new StreamableHTTPError(400, `Error POSTing to endpoint: ${body}`),
      'http://e',
    );
    expect(answer).toEqual({
      jsonrpc: '2.0',
      id: 3,
      error: {
        code: -32000,
        message: 'switchyard engine refused tools/list (HTTP 400): Bad Request: Server not initialized',
      },
    });
  });

  it('keeps the transport text when the refusal has no JSON-RPC body', () => {
    const answer = relayError(
      request,
      new StreamableHTTPError(502, 'Error POSTing to endpoint: Bad Gateway'),
      'http://e',
    );
    expect(answer).toMatchObject({
      error: {
        code: -32600,
        message: expect.stringMatching(/^switchyard engine refused tools\/list \(HTTP 502\): .*Bad Gateway/),
      },
    });
  });

  it('names an engine that did not answer as unreachable, with its URL', () => {
    const failed = new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } });
    const answer = relayError(request, failed, 'http://127.0.0.1:9');
    expect(answer).toMatchObject({
      error: {
        code: -32000,
        message: expect.stringContaining(
          'unreachable: cannot reach the Switchyard engine at http://127.0.0.1:9 (ECONNREFUSED)',
        ),
      },
    });
  });

  it('answers nothing for a notification (there is no id to answer)', () => {
    expect(
      relayError({ jsonrpc: '2.0', method: 'notifications/initialized' }, new Error('x'), 'http://e'),
    ).toBeUndefined();
  });
});
