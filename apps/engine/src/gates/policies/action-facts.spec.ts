import { actionFacts, hostsIn, toolNameOf } from './action-facts';

describe('action facts', () => {
  it('names each action by the tool that runs it, or <type>_<op> where no tool does', () => {
    expect(toolNameOf({ type: 'code', language: 'bash', code: 'ls' })).toBe('bash');
    expect(toolNameOf({ type: 'file', op: 'list', path: '.' })).toBe('ls');
    expect(toolNameOf({ type: 'file', op: 'delete', path: 'x' })).toBe('file_delete');
    expect(toolNameOf({ type: 'browser', op: 'upload', selector: 'input', path: 'a' })).toBe(
      'browser_upload',
    );
    expect(toolNameOf({ type: 'process', op: 'list' })).toBe('process_list');
    expect(toolNameOf({ type: 'kernel', op: 'restart', language: 'python' })).toBe('kernel_restart');
    expect(toolNameOf({ type: 'skill', name: 'summarize', input: {} })).toBe('summarize');
  });

  it('finds the hosts code and commands name, and a browser URL’s', () => {
    expect(
      hostsIn(
        'curl https://api.Example.com/x && git clone git@github.com:a/b.git; wget http://user:pw@10.0.0.1:8080/',
      ),
    ).toEqual(['api.example.com', '10.0.0.1', 'github.com']);
    expect(hostsIn('print(1)')).toEqual([]);
    const facts = actionFacts(
      { type: 'browser', op: 'navigate', url: 'https://Docs.Example.org/a?b' },
      { tier: 'browser', risk: { level: 'low' } },
    );
    expect(facts).toEqual({
      tool: 'browser_navigate',
      type: 'browser',
      op: 'navigate',
      tier: 'browser',
      risk: 'low',
      hosts: ['docs.example.org'],
    });
    expect(
      actionFacts(
        { type: 'skill', name: 's', input: {} },
        { tier: 'pooled', risk: { level: 'medium' }, language: 'node' },
      ),
    ).toEqual({ tool: 's', type: 'skill', tier: 'pooled', risk: 'medium', language: 'node', hosts: [] });
  });

  it('takes a process command and its stdin for bash code, naming their hosts; other process ops run none', () => {
    const routed = { tier: 'subprocess', risk: { level: 'low' } };
    expect(actionFacts({ type: 'process', op: 'start', command: 'curl http://a.test/' }, routed)).toEqual({
      tool: 'process_start',
      type: 'process',
      op: 'start',
      tier: 'subprocess',
      risk: 'low',
      language: 'bash',
      hosts: ['a.test'],
    });
    expect(
      actionFacts(
        { type: 'process', op: 'write', processId: 'prc_1', data: 'wget https://b.test\n' },
        routed,
      ),
    ).toMatchObject({ tool: 'process_write', language: 'bash', hosts: ['b.test'] });
    const stop = actionFacts({ type: 'process', op: 'stop', processId: 'prc_1' }, routed);
    expect(stop).toEqual({
      tool: 'process_stop',
      type: 'process',
      op: 'stop',
      tier: 'subprocess',
      risk: 'low',
      hosts: [],
    });
  });

  it('takes a terminal for bash: its opening matches `language: bash` (and its command’s hosts), its close runs none', () => {
    const routed = { tier: 'pooled', risk: { level: 'low' } };
    const open = { type: 'terminal', op: 'open', terminalId: 'trm_1', cols: 80, rows: 24 } as const;
    expect(actionFacts(open, routed)).toEqual({
      tool: 'terminal',
      type: 'terminal',
      op: 'open',
      tier: 'pooled',
      risk: 'low',
      language: 'bash',
      hosts: [],
    });
    expect(actionFacts({ ...open, command: 'curl https://code.test/x' }, routed).hosts).toEqual([
      'code.test',
    ]);
    const close = actionFacts(
      { type: 'terminal', op: 'close', terminalId: 'trm_1', reason: 'exited' },
      routed,
    );
    expect(close).toEqual({
      tool: 'terminal_close',
      type: 'terminal',
      op: 'close',
      tier: 'pooled',
      risk: 'low',
      hosts: [],
    });
  });
});
