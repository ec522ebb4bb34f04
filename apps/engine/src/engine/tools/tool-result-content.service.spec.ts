import { type ActionResult, NO_RISK } from '@switchyard/common';
import type { FileOp, FileOpOutcome } from '@switchyard/workspace';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import { ToolResultContent } from './tool-result-content.service';

const PNG = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(92, 1)]).toString('base64');

/** A workspace of a few files, answering reads as the file API does (base64 for binary, utf8 for text). */
class FakeFiles {
  readonly reads: { sessionId: string; op: FileOp }[] = [];
  constructor(private readonly files: Record<string, Record<string, unknown>>) {}

  fileOp(sessionId: string, op: FileOp): Promise<FileOpOutcome> {
    this.reads.push({ sessionId, op });
    const output = op.op === 'read' ? this.files[op.path] : undefined;
    if (!output) return Promise.reject(new Error(`${(op as { path: string }).path} does not exist`));
    return Promise.resolve({ output, touched: [] });
  }
}

const config = (imageMaxBytes: number) => ({ tools: { imageMaxBytes } }) as unknown as EngineConfig;

const screenshot = (artifacts: unknown[]): ActionResult => ({
  id: 'act_1',
  sessionId: 'ses_1',
  type: 'browser',
  status: 'succeeded',
  output: { artifacts },
  truncated: { stdout: false, stderr: false },
  durationMs: 1,
  startedAt: '2026-01-01T00:00:00.000Z',
  tier: 'browser',
  risk: NO_RISK,
});

describe('ToolResultContent', () => {
  it("reads an image file through the file API in the action's session and attaches it", async () => {
    const files = new FakeFiles({ 'shots/a.png': { encoding: 'base64', content: PNG } });
    const content = new ToolResultContent(config(1000), files as unknown as SessionWorkspaces);
    const outcome = await content.outcome(
      'browser',
      screenshot([{ path: 'shots/a.png', bytes: 100, mimeType: 'image/png' }]),
    );
    expect(outcome.parts[1]).toEqual({
      type: 'image',
      text: '[image]\nshots/a.png: image/png, 100 B',
      mimeType: 'image/png',
      data: PNG,
      where: 'the workspace file shots/a.png',
    });
    expect(files.reads).toEqual([{ sessionId: 'ses_1', op: { op: 'read', path: 'shots/a.png' } }]);
  });

  it('says why a file is not attached: over the cap (not read at all), not an image, gone', async () => {
    const files = new FakeFiles({
      'big.png': { encoding: 'base64', content: PNG },
      'text.png': { encoding: 'utf8', content: 'not a png' },
    });
    const content = new ToolResultContent(config(50), files as unknown as SessionWorkspaces);
    const outcome = await content.outcome(
      'browser',
      screenshot([
        { path: 'big.png', bytes: 100, mimeType: 'image/png' },
        { path: 'text.png', mimeType: 'image/png' },
        { path: 'gone.png', mimeType: 'image/png' },
      ]),
    );
    expect(outcome.parts.slice(1)).toEqual([
      {
        type: 'text',
        text:
          '[image]\nbig.png: image/png, 100 B; not attached: over the 50 B image cap ' +
          '(SWITCHYARD_TOOL_IMAGE_MAX_BYTES); it is the workspace file big.png',
      },
      {
        type: 'text',
        text: '[image]\ntext.png: could not be attached: not an image file; it is the workspace file text.png',
      },
      {
        type: 'text',
        text: '[image]\ngone.png: could not be attached: gone.png does not exist; it is the workspace file gone.png',
      },
    ]);
    expect(files.reads.map((r) => (r.op as { path: string }).path)).toEqual(['text.png', 'gone.png']);
  });

  it('reads nothing when there is nothing to attach', async () => {
    const files = new FakeFiles({});
    const content = new ToolResultContent(config(1000), files as unknown as SessionWorkspaces);
    expect((await content.outcome('browser', screenshot([]))).parts).toEqual([
      { type: 'text', text: '{"artifacts":[]}' },
    ]);
    expect(files.reads).toEqual([]);
  });
});
