import { ENGINE_SESSION_META, imageArtifacts, mcpErrorResult, toMcpResult } from './mcp-tool-result';

describe('imageArtifacts', () => {
  it("reads the image artifacts of a browser result's JSON line, before its hints", () => {
    const output = {
      url: 'http://127.0.0.2/',
      artifacts: [
        { path: 'shots/a.png', bytes: 10, mimeType: 'image/png' },
        { path: 'page.pdf', bytes: 20, mimeType: 'application/pdf' },
      ],
    };
    expect(imageArtifacts(`${JSON.stringify(output)}\n[hint]\nsomething`)).toEqual([
      { path: 'shots/a.png', bytes: 10, mimeType: 'image/png' },
    ]);
  });

  it('names nothing for text that is not a result with artifacts', () => {
    expect(imageArtifacts('[stdout]\nhi\n\n[exit_code]\n0')).toEqual([]);
    expect(imageArtifacts('{"url":"x"}')).toEqual([]);
    expect(imageArtifacts('null')).toEqual([]);
    expect(imageArtifacts('{"artifacts":[{"path":1,"mimeType":"image/png"},null,"x"]}')).toEqual([]);
  });
});

describe('toMcpResult', () => {
  it('keeps the text, maps is_error to isError, adds the blocks and the engine session in _meta', () => {
    const image = { type: 'image' as const, data: 'iVBO', mimeType: 'image/png' };
    expect(toMcpResult({ content: 'out', is_error: false }, [image], 'ses_1')).toEqual({
      content: [{ type: 'text', text: 'out' }, image],
      isError: false,
      _meta: { [ENGINE_SESSION_META]: 'ses_1' },
    });
    expect(toMcpResult({ content: '[exit_code]\n3', is_error: true }, [], 'ses_1').isError).toBe(true);
  });

  it('an error result is text with isError', () => {
    expect(mcpErrorResult('gone', 'ses_2')).toEqual({
      content: [{ type: 'text', text: 'gone' }],
      isError: true,
      _meta: { 'switchyard/sessionId': 'ses_2' },
    });
  });
});
