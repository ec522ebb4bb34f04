import { Injectable } from '@nestjs/common';
import type { ImageContent, TextContent } from '@modelcontextprotocol/sdk/types.js';
import { SessionsService } from '../../session/sessions/sessions.service';
import { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import type { Artifact } from './mcp-tool-result';

/**
 * Screenshots as MCP image blocks. The browser saves them as workspace files and its result names them, so they are
 * read back through the workspace's file API (its path guard: nothing outside the session's workspace is read).
 */
@Injectable()
export class McpImages {
  constructor(
    private readonly sessions: SessionsService,
    private readonly workspaces: SessionWorkspaces,
  ) {}

  /** One image block per artifact; an artifact that cannot be read is a text line saying why. */
  async read(
    tenant: string,
    engineSessionId: string,
    artifacts: Artifact[],
  ): Promise<(ImageContent | TextContent)[]> {
    if (artifacts.length === 0) return [];
    const session = this.sessions.get(tenant, engineSessionId);
    const blocks: (ImageContent | TextContent)[] = [];
    for (const artifact of artifacts) {
      try {
        const { output } = await this.workspaces.fileOp(session.id, { op: 'read', path: artifact.path });
        if (output.encoding !== 'base64' || typeof output.content !== 'string') {
          throw new Error('not an image file');
        }
        blocks.push({ type: 'image', data: output.content, mimeType: artifact.mimeType });
      } catch (err) {
        blocks.push({
          type: 'text',
          text: `[image] ${artifact.path} is in the workspace but could not be attached: ${(err as Error).message}`,
        });
      }
    }
    return blocks;
  }
}
