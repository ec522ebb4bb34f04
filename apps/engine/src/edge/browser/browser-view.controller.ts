import { Controller, Get, Param, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { BrowserRouter } from '@switchyard/browser';
import { SwitchyardError } from '@switchyard/common';
import type { Response } from 'express';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ApiErrors, ApiV1Errors } from '../http/api-responses';
import { ApiKeyGuard } from '../http/api-key.guard';
import { Tenant } from '../http/tenant.decorator';
import { binaryContent } from '../files/file-transfer.schemas';

/** Headers naming what the picture shows; percent-encoded (a URL or title may hold any character). */
export const VIEW_HEADERS = {
  url: 'x-switchyard-page-url',
  title: 'x-switchyard-page-title',
  tab: 'x-switchyard-tab',
} as const;

/** The session has no browser tab to show. */
class NoBrowserError extends SwitchyardError {
  readonly code = 'NO_BROWSER';
  readonly kind = 'not_found' as const;
}

/**
 * A person watching a session's browser (the console's live view): the current tab as a picture, read only. A look
 * is not an action: nothing runs in the page, no file is written, nothing is recorded in the graph, and it does not
 * wait for the session's running action. It never opens a browser: a session without one answers 404 NO_BROWSER.
 */
@ApiTags('browser')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/browser')
export class BrowserViewController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly browser: BrowserRouter,
  ) {}

  @Get('view')
  @ApiOperation({
    summary: "The session's current browser tab as a JPEG, for watching (not recorded, changes nothing)",
    description:
      'The viewport of the tab the session’s browser actions work in, as it is now, with its URL, title and tab ' +
      `id in \`${VIEW_HEADERS.url}\`, \`${VIEW_HEADERS.title}\` and \`${VIEW_HEADERS.tab}\` (percent-encoded). ` +
      'Unlike a `screenshot` browser action it is not an action: nothing runs in the page, no file is written, ' +
      'nothing is recorded, and it does not wait for a running action. 404 `NO_BROWSER` when the session has no ' +
      'open browser tab (it never opens one) or the page did not paint within 2 s.',
  })
  @ApiOkResponse({
    description: 'The tab’s viewport',
    headers: {
      [VIEW_HEADERS.url]: { description: 'The page’s URL, percent-encoded', schema: { type: 'string' } },
      [VIEW_HEADERS.title]: { description: 'The page’s title, percent-encoded', schema: { type: 'string' } },
      [VIEW_HEADERS.tab]: { description: 'The tab’s id (`tab_1`…)', schema: { type: 'string' } },
    },
    ...binaryContent('image/jpeg'),
  })
  @ApiErrors(404)
  async view(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Res() res: Response,
  ): Promise<void> {
    this.sessions.get(tenant, sessionId);
    const view = await this.browser.view(sessionId);
    if (!view) {
      throw new NoBrowserError(
        `session ${sessionId} has no open browser tab to look at (a browser action opens one)`,
      );
    }
    res
      .status(200)
      .set({
        'content-type': 'image/jpeg',
        'cache-control': 'no-store',
        [VIEW_HEADERS.url]: encodeURIComponent(view.url),
        [VIEW_HEADERS.title]: encodeURIComponent(view.title),
        [VIEW_HEADERS.tab]: view.tab,
      })
      .end(view.image);
  }
}
