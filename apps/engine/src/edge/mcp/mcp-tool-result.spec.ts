import { textOutcome, type ToolOutcome } from '../../engine/tools/tool-outcome';
import { ENGINE_SESSION_META, mcpErrorResult, toMcpResult } from './mcp-tool-result';

describe('toMcpResult', () => {
  it('keeps the text, maps is_error to isError, and names the engine session in _meta', () => {
    expect(toMcpResult(textOutcome('out', false), 'ses_1')).toEqual({
      content: [{ type: 'text', text: 'out' }],
      isError: false,
      _meta: { [ENGINE_SESSION_META]: 'ses_1' },
    });
    expect(toMcpResult(textOutcome('[exit_code]\n3', true), 'ses_1').isError).toBe(true);
  });

  it('answers images as image content, each after the text naming it', () => {
    const outcome: ToolOutcome = {
      parts: [
        { type: 'text', text: '[stdout]\ndrawn' },
        {
          type: 'image',
          text: '[display image/png]\nimage/png, 8 B',
          mimeType: 'image/png',
          data: 'iVBORw0KGgo=',
          where: 'output.results[0] of action act_1',
        },
        { type: 'text', text: '[exit_code]\n0' },
      ],
      is_error: false,
    };
    expect(toMcpResult(outcome, 'ses_1').content).toEqual([
      { type: 'text', text: '[stdout]\ndrawn\n[display image/png]\nimage/png, 8 B' },
      { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' },
      { type: 'text', text: '[exit_code]\n0' },
    ]);
  });

  it('an error result is text with isError', () => {
    expect(mcpErrorResult('gone', 'ses_2')).toEqual({
      content: [{ type: 'text', text: 'gone' }],
      isError: true,
      _meta: { 'switchyard/sessionId': 'ses_2' },
    });
  });
});
