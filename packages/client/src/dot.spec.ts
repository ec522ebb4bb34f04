import { graphToDot } from './dot';

describe('graphToDot', () => {
  it('renders nodes with a caption and labelled edges, escaping quotes and newlines', () => {
    const dot = graphToDot(
      {
        nodes: [
          { id: 'ses_1', label: 'Session', properties: {} },
          { id: 'act_1', label: 'Action', properties: { inputSummary: 'echo "hi"\nls', status: 'failed' } },
          { id: 'file:a.py', label: 'File', properties: { path: 'a.py' } },
        ],
        edges: [
          { from: 'ses_1', to: 'act_1', type: 'HAS_ACTION', properties: {} },
          { from: 'act_1', to: 'file:a.py', type: 'WROTE', properties: {} },
        ],
      },
      'ses_1',
    );
    expect(dot).toBe(
      [
        'digraph "ses_1" {',
        '  rankdir=LR;',
        '  node [shape=box];',
        '  "ses_1" [label="Session ses_1"];',
        '  "act_1" [label="Action: echo \\"hi\\"\\nls [failed]"];',
        '  "file:a.py" [label="File: a.py"];',
        '  "ses_1" -> "act_1" [label="HAS_ACTION"];',
        '  "act_1" -> "file:a.py" [label="WROTE"];',
        '}',
        '',
      ].join('\n'),
    );
  });
});
