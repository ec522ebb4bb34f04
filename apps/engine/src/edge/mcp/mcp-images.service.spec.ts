import type { FileOp, FileOpOutcome } from '@switchyard/workspace';
import type { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import type { Session } from '../../state/sessions/session.model';
import type { SessionsService } from '../../session/sessions/sessions.service';
import { McpImages } from './mcp-images.service';

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

const session = { id: 'ses_1', tenant: 't' } as Session;
const sessions = {
  get: (tenant: string, id: string) => {
    if (tenant !== 't' || id !== 'ses_1') throw new Error('session not found');
    return session;
  },
  workspaceOf: () => '/data/workspaces/ses_1',
} as unknown as SessionsService;

describe('McpImages', () => {
  it("reads each artifact through the file API in the session's workspace, as an image block", async () => {
    const files = new FakeFiles({ 'shots/a.png': { encoding: 'base64', content: 'iVBORw0K' } });
    const images = new McpImages(sessions, files as unknown as SessionWorkspaces);
    await expect(
      images.read('t', 'ses_1', [{ path: 'shots/a.png', mimeType: 'image/png' }]),
    ).resolves.toEqual([{ type: 'image', data: 'iVBORw0K', mimeType: 'image/png' }]);
    expect(files.reads).toEqual([{ sessionId: 'ses_1', op: { op: 'read', path: 'shots/a.png' } }]);
  });

  it('says in a text block why an artifact could not be attached', async () => {
    const files = new FakeFiles({ 'text.png': { encoding: 'utf8', content: 'not a png' } });
    const images = new McpImages(sessions, files as unknown as SessionWorkspaces);
    const blocks = await images.read('t', 'ses_1', [
      { path: 'text.png', mimeType: 'image/png' },
      { path: 'gone.png', mimeType: 'image/png' },
    ]);
    expect(blocks).toEqual([
      { type: 'text', text: expect.stringMatching(/^\[image\] text\.png .*not an image file$/) },
      { type: 'text', text: expect.stringMatching(/^\[image\] gone\.png .*does not exist$/) },
    ]);
  });

  it('reads nothing when there is nothing to attach', async () => {
    const files = new FakeFiles({});
    await expect(
      new McpImages(sessions, files as unknown as SessionWorkspaces).read('x', 'y', []),
    ).resolves.toEqual([]);
    expect(files.reads).toEqual([]);
  });
});
