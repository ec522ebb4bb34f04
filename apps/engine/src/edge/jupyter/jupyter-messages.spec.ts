import { jupyterMessage, parseJupyterRequest, replyType } from './jupyter-messages';

describe('Jupyter messages over the channels WebSocket', () => {
  it('reads a request; one without a channel is a shell request', () => {
    const header = { msg_id: 'm1', msg_type: 'execute_request', username: 'u', session: 's' };
    expect(parseJupyterRequest({ header, content: { code: '1' }, channel: 'shell' })).toEqual({
      channel: 'shell',
      msgType: 'execute_request',
      msgId: 'm1',
      header,
      content: { code: '1' },
    });
    expect(parseJupyterRequest({ header, content: {} })).toMatchObject({ channel: 'shell' });
    expect(parseJupyterRequest({ header, channel: 'control' })).toMatchObject({
      channel: 'control',
      content: {},
    });
  });

  it('names what a frame lacks to be a request', () => {
    expect(parseJupyterRequest([])).toBe('a message must be a JSON object');
    expect(parseJupyterRequest({ content: {} })).toBe('header must be an object');
    expect(parseJupyterRequest({ header: { msg_id: 'm' } })).toMatch(/^header\.msg_type/);
    expect(parseJupyterRequest({ header: { msg_type: 't', msg_id: 'x'.repeat(257) } })).toMatch(
      /^header\.msg_id/,
    );
    expect(parseJupyterRequest({ header: { msg_type: 't', msg_id: 'm' }, content: 3 })).toBe(
      'content must be an object',
    );
    expect(parseJupyterRequest({ header: { msg_type: 't', msg_id: 'm' }, channel: 'nope' })).toMatch(
      /^channel/,
    );
  });

  it('answers with the request’s header as parent, msg_id and msg_type at the top too, protocol 5.3', () => {
    const request = parseJupyterRequest({
      header: { msg_id: 'm1', msg_type: 'kernel_info_request', username: 'ada' },
    });
    if (typeof request === 'string') throw new Error(request);
    const message = jupyterMessage(
      'shell',
      replyType(request.msgType),
      { status: 'ok' },
      request,
      'kses',
      new Date(0),
    );
    expect(message).toEqual({
      header: {
        msg_id: message.msg_id,
        msg_type: 'kernel_info_reply',
        username: 'ada',
        session: 'kses',
        date: '1970-01-01T00:00:00.000Z',
        version: '5.3',
      },
      msg_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      msg_type: 'kernel_info_reply',
      parent_header: request.header,
      metadata: {},
      content: { status: 'ok' },
      channel: 'shell',
      buffers: [],
    });
    expect(jupyterMessage('iopub', 'status', {}, undefined, 'kses', new Date(0)).parent_header).toEqual({});
  });
});
