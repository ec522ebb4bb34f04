import { answerFor } from './tool-answers';
import { textOutcome, type ToolImage, type ToolOutcome } from './tool-outcome';

const PNG = 'iVBORw0KGgo=';
const image: ToolImage = {
  type: 'image',
  text: '[image]\nplot.png: image/png, 8 B',
  mimeType: 'image/png',
  data: PNG,
  where: 'the workspace file plot.png',
};
/** A cell's answer with an image between two text sections. */
const withImage: ToolOutcome = {
  parts: [{ type: 'text', text: '[stdout]\nhi\n' }, image, { type: 'text', text: '[exit_code]\n0' }],
  is_error: false,
};
const asText =
  '[stdout]\nhi\n\n[image]\nplot.png: image/png, 8 B; not shown (this tool result takes text only): it is the ' +
  'workspace file plot.png\n[exit_code]\n0';

describe('answerFor', () => {
  const text = textOutcome('[stdout]\nhi\n\n[exit_code]\n0', false);
  const content = '[stdout]\nhi\n\n[exit_code]\n0';

  it('answers a plain call as before: {tool_use_id, content, is_error}', () => {
    expect(answerFor({ id: 't1', format: 'plain' }, text)).toEqual({
      tool_use_id: 't1',
      content,
      is_error: false,
    });
  });

  it('answers a tool_use block with a tool_result block', () => {
    expect(answerFor({ id: 't1', format: 'anthropic' }, text)).toEqual({
      type: 'tool_result',
      tool_use_id: 't1',
      content,
      is_error: false,
    });
  });

  it("answers an OpenAI call with tool_call_id and the role: tool message, holding nothing OpenAI's API refuses", () => {
    const answer = answerFor({ id: 'call_9', format: 'openai' }, textOutcome('boom', true));
    expect(answer).toEqual({
      tool_use_id: 'call_9',
      tool_call_id: 'call_9',
      content: 'boom',
      is_error: true,
      message: { role: 'tool', tool_call_id: 'call_9', content: 'boom' },
    });
  });

  it('answers a function_call item with the function_call_output item to append as is', () => {
    expect(answerFor({ id: 'call_3', format: 'responses' }, text)).toEqual({
      tool_use_id: 'call_3',
      call_id: 'call_3',
      content,
      is_error: false,
      item: { type: 'function_call_output', call_id: 'call_3', output: content },
    });
  });

  it('an empty answer says so', () => {
    expect(answerFor({ id: 't', format: 'anthropic' }, { parts: [], is_error: false })).toMatchObject({
      content: '(no output)',
    });
  });
});

describe('answerFor with images', () => {
  it('Anthropic (and plain): content is text and base64 image blocks, each image after the text naming it', () => {
    const blocks = [
      { type: 'text', text: '[stdout]\nhi\n\n[image]\nplot.png: image/png, 8 B' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
      { type: 'text', text: '[exit_code]\n0' },
    ];
    expect(answerFor({ id: 't', format: 'anthropic' }, withImage)).toEqual({
      type: 'tool_result',
      tool_use_id: 't',
      content: blocks,
      is_error: false,
    });
    expect(answerFor({ id: 't', format: 'plain' }, withImage)).toEqual({
      tool_use_id: 't',
      content: blocks,
      is_error: false,
    });
  });

  it('Responses: output is input_text and input_image items, the image a data URL', () => {
    expect(answerFor({ id: 'c', format: 'responses' }, withImage)).toEqual({
      tool_use_id: 'c',
      call_id: 'c',
      content: asText,
      is_error: false,
      item: {
        type: 'function_call_output',
        call_id: 'c',
        output: [
          { type: 'input_text', text: '[stdout]\nhi\n\n[image]\nplot.png: image/png, 8 B' },
          { type: 'input_image', image_url: `data:image/png;base64,${PNG}` },
          { type: 'input_text', text: '[exit_code]\n0' },
        ],
      },
    });
  });

  it('Chat Completions: text only, the image named with where it is', () => {
    expect(answerFor({ id: 'c', format: 'openai' }, withImage)).toEqual({
      tool_use_id: 'c',
      tool_call_id: 'c',
      content: asText,
      is_error: false,
      message: { role: 'tool', tool_call_id: 'c', content: asText },
    });
  });

  it('an answer that is only an image still has its text block first', () => {
    const only: ToolOutcome = { parts: [image], is_error: false };
    expect(answerFor({ id: 't', format: 'anthropic' }, only)).toMatchObject({
      content: [{ type: 'text', text: image.text }, { type: 'image' }],
    });
  });
});
