import { Inject, Injectable } from '@nestjs/common';
import type { ActionResult, ActionType } from '@switchyard/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import { toContent } from './tool-content';
import { fileOverCap, imageParts, type ToolImageFile } from './tool-image-parts';
import type { ToolOutcome, ToolPart } from './tool-outcome';

/**
 * An action's result as a tool call's outcome, its images attached: the one way images reach models, for every
 * tool-call format and MCP. Image files (a browser's screenshot, a cell's image written to the workspace) are read
 * through the workspace's file API (its path guard: nothing outside the session's workspace is read).
 */
@Injectable()
export class ToolResultContent {
  private readonly maxImageBytes: number;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly workspaces: SessionWorkspaces,
  ) {
    this.maxImageBytes = config.tools.imageMaxBytes;
  }

  async outcome(kind: ActionType, result: ActionResult): Promise<ToolOutcome> {
    const draft = toContent(kind, result, { maxImageBytes: this.maxImageBytes });
    const parts: ToolPart[] = [];
    for (const part of draft.parts) {
      parts.push(...(part.type === 'image-file' ? await this.readImage(result.sessionId, part) : [part]));
    }
    return { parts, is_error: draft.is_error };
  }

  /** The image of a workspace file, or a line saying why it is not attached. */
  private async readImage(sessionId: string, file: ToolImageFile): Promise<ToolPart[]> {
    const where = `the workspace file ${file.path}`;
    if (file.bytes !== undefined && file.bytes > this.maxImageBytes) {
      return [fileOverCap(file, file.bytes, this.maxImageBytes)];
    }
    try {
      const { output } = await this.workspaces.fileOp(sessionId, { op: 'read', path: file.path });
      if (output.encoding !== 'base64' || typeof output.content !== 'string') {
        throw new Error('not an image file');
      }
      const { header, lead, dims, declared } = file;
      return imageParts(output.content, { header, lead, dims, declared, where }, this.maxImageBytes);
    } catch (err) {
      return [
        {
          type: 'text',
          text: `${file.header}\n${file.lead}could not be attached: ${(err as Error).message}; it is ${where}`,
        },
      ];
    }
  }
}
