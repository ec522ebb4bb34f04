import { Controller, Get, Param, Put, Query, Req, Res, UseGuards } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiBody,
  ApiConsumes,
  ApiHeader,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import { type ActionResult, SwitchyardError } from '@switchyard/common';
import { FileOpError } from '@switchyard/workspace';
import type { Request, Response } from 'express';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { ExecutionEngine } from '../../engine/actions/execution-engine.service';
import {
  type DownloadHead,
  FileTransferChannel,
  type TransferIo,
} from '../../engine/handlers/file-transfer-channel';
import { errorBody } from '../../platform/validation/error-body';
import type { Session } from '../../state/sessions/session.model';
import type { FileTransferRequest } from '../../state/actions/action-request';
import { SessionsService } from '../../session/sessions/sessions.service';
import { ApiErrors, ApiV1Errors, ERROR_RESPONSE } from '../http/api-responses';
import { ApiKeyGuard } from '../http/api-key.guard';
import { RequestId } from '../http/request-id.decorator';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { BINARY, binaryContent } from './file-transfer.schemas';
import { overwriteParam, pathParam, rangeHeader } from './transfer-query';

const ACTION_ID_HEADER = 'x-switchyard-action-id';
const ACTION_ID_DOC = {
  [ACTION_ID_HEADER]: {
    description: 'The `file` action that recorded the transfer',
    schema: { type: 'string' },
  },
};

/**
 * Moving files in and out of a session's workspace for real sizes: one file's raw bytes (`files/content`, with
 * `Range`) and a directory as a tar (`files/archive`), streamed both ways (the engine holds about a MiB of a transfer
 * at a time, whatever its size). Each transfer is a `file` action (op `upload`, `download`, `upload_archive`,
 * `download_archive`) on the one path of every action: policies (tools `file_upload`, `file_download`,
 * `file_upload_archive`, `file_download_archive`), approvals, hooks, the graph (READ/WROTE edges; size and sha256
 * in the excerpt). A policy `ask` is answered 403 `APPROVAL_REQUIRED` at once (the action cancelled): a stream
 * cannot wait for a person.
 */
@ApiTags('files')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/files')
export class FilesController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly engine: ExecutionEngine,
    private readonly channel: FileTransferChannel,
  ) {}

  @Put('content')
  @ApiOperation({
    summary: 'Upload one file: the request body is its bytes, streamed, any size up to the workspace quota',
    description:
      'Parent directories are made; the file is replaced atomically (a temporary file renamed over it), so a ' +
      'failed or aborted upload leaves the old file as it was. 409 FILE_EXISTS with `overwrite=false` when it ' +
      'exists; 413 WORKSPACE_FULL past the quota; 403 when a policy denies `file_upload` (recorded denied).',
  })
  @ApiQuery({
    name: 'path',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 4096 },
    description: 'File path relative to the workspace root',
  })
  @ApiQuery({
    name: 'overwrite',
    required: false,
    schema: { type: 'string', enum: ['true', 'false'] },
    description: 'Default true',
  })
  @ApiConsumes('application/octet-stream')
  @ApiBody({
    required: false,
    description: 'The file’s bytes (any content type; absent or empty: an empty file)',
    schema: BINARY,
  })
  @ApiOkResponse({ description: 'The file written', ...jsonBody('FileUpload') })
  @ApiErrors(400, 403, 404, 409, 413, 429)
  async upload(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Req() req: Request,
    @Res() res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    const overwrite = overwriteParam(query);
    const request: FileTransferRequest = {
      type: 'file',
      op: 'upload',
      path: pathParam(query, true),
      ...(!overwrite && { overwrite }),
    };
    const result = await this.transfer(session, request, { body: req }, req, res, requestId);
    if (result) res.status(200).json({ ...(result.output as object), actionId: result.id });
  }

  @Get('content')
  @ApiOperation({
    summary: 'Download one file: its bytes, streamed (a `Range: bytes=a-b` gives a 206 with those bytes)',
    description:
      '404 FILE_NOT_FOUND for a missing file; 416 for a range starting past its end; 403 when a policy denies ' +
      '`file_download` (recorded denied).',
  })
  @ApiQuery({
    name: 'path',
    required: true,
    schema: { type: 'string', minLength: 1, maxLength: 4096 },
    description: 'File path relative to the workspace root',
  })
  @ApiHeader({
    name: 'Range',
    required: false,
    description: 'One range, `bytes=start-end` or `bytes=start-`',
  })
  @ApiOkResponse({
    description: 'The file’s bytes',
    headers: { ...ACTION_ID_DOC, 'Accept-Ranges': { schema: { type: 'string', enum: ['bytes'] } } },
    ...binaryContent('application/octet-stream'),
  })
  @ApiResponse({
    status: 206,
    description: 'The bytes of the range asked for',
    headers: {
      ...ACTION_ID_DOC,
      'Content-Range': { schema: { type: 'string', example: 'bytes 0-99/1000' } },
    },
    ...binaryContent('application/octet-stream'),
  })
  @ApiResponse({
    status: 416,
    description: 'The range starts at or past the end of the file (`Content-Range: bytes */<size>`)',
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_RESPONSE}` } } },
  })
  @ApiErrors(400, 403, 404, 409, 429)
  async download(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Req() req: Request,
    @Res() res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    const range = rangeHeader(req.headers.range);
    const request: FileTransferRequest = {
      type: 'file',
      op: 'download',
      path: pathParam(query, true),
      ...(range && { range }),
    };
    await this.transfer(
      session,
      request,
      { sink: sinkOf(res, 'application/octet-stream') },
      req,
      res,
      requestId,
    );
  }

  @Put('archive')
  @ApiOperation({
    summary:
      'Upload a directory as a tar (gzip-compressed accepted): extracted into `path` (made when missing)',
    description:
      'Every entry passes the path guard: absolute names, `..`, links leading out of the workspace, devices and ' +
      'fifos are refused (400, nothing written: entries are staged and moved into place only once the whole ' +
      'archive was accepted). Files replace files; hard links become copies. 413 past the quota.',
  })
  @ApiQuery({
    name: 'path',
    required: false,
    schema: { type: 'string', maxLength: 4096 },
    description: 'Directory relative to the workspace root (default: the root)',
  })
  @ApiConsumes('application/x-tar', 'application/octet-stream')
  @ApiBody({
    required: false,
    description: 'A tar, or a gzip-compressed tar (any content type; absent or empty: nothing to extract)',
    schema: BINARY,
  })
  @ApiOkResponse({ description: 'What was extracted', ...jsonBody('ArchiveUpload') })
  @ApiErrors(400, 403, 404, 409, 413, 429)
  async uploadArchive(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Req() req: Request,
    @Res() res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    const request: FileTransferRequest = {
      type: 'file',
      op: 'upload_archive',
      path: pathParam(query, false),
    };
    const result = await this.transfer(session, request, { body: req }, req, res, requestId);
    if (result) res.status(200).json({ ...(result.output as object), actionId: result.id });
  }

  @Get('archive')
  @ApiOperation({
    summary: 'Download a directory as a tar stream, entries relative to it (default: the workspace root)',
    description:
      'Links are archived as links; fifos, sockets, devices and hard-linked files are left out; from the root, ' +
      'the session’s home (`.home`) too.',
  })
  @ApiQuery({
    name: 'path',
    required: false,
    schema: { type: 'string', maxLength: 4096 },
    description: 'Directory relative to the workspace root (default: the root)',
  })
  @ApiOkResponse({ description: 'The tar', headers: ACTION_ID_DOC, ...binaryContent('application/x-tar') })
  @ApiErrors(400, 403, 404, 409, 429)
  async downloadArchive(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
    @Req() req: Request,
    @Res() res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<void> {
    const session = this.sessions.get(tenant, sessionId);
    const request: FileTransferRequest = {
      type: 'file',
      op: 'download_archive',
      path: pathParam(query, false),
    };
    await this.transfer(session, request, { sink: sinkOf(res, 'application/x-tar') }, req, res, requestId);
  }

  /**
   * Submits the transfer as a `file` action with its stream beside it and awaits its end. Answers every refusal
   * itself (403 for a denial, the domain error's status for a failure, 416 for a range past the end) and returns the
   * result of an upload that succeeded (a download has answered by then), or undefined when nothing is left to say.
   */
  private async transfer(
    session: Session,
    request: FileTransferRequest,
    io: TransferIo,
    req: Request,
    res: Response,
    requestId: string | undefined,
  ): Promise<ActionResult | undefined> {
    this.channel.attach(request, io);
    const submitted = await this.engine.submit(session, request, {
      ...(requestId !== undefined && { requestId }),
    });
    if (submitted.approval) {
      // A person decides when an asked action runs, and a stream cannot wait for that: the transfer is refused
      // before a byte moves, and its action cancelled.
      submitted.completion.catch(() => undefined);
      await this.engine.cancel(session, submitted.id).catch(() => undefined);
      res.setHeader(ACTION_ID_HEADER, submitted.id);
      if (io.body) res.setHeader('connection', 'close');
      const tool = `file_${request.op}`;
      res
        .status(403)
        .json(
          errorBody(
            'APPROVAL_REQUIRED',
            `a policy asks for approval of ${tool}, and a streamed transfer cannot wait for one: allow ${tool} ` +
              'for this session, or move the content with file actions (which can wait for an approval)',
            [],
            { actionId: submitted.id },
          ),
        );
      return undefined;
    }
    // The client gone before the end (while an approval or the queue held it, or mid-transfer): the action stops.
    const onGone = () => {
      if (!res.writableFinished) this.engine.cancel(session, submitted.id).catch(() => undefined);
    };
    res.once('close', onGone);
    const { result, inputRefusal } = await submitted.completion;
    res.off('close', onGone);
    if (res.headersSent || res.destroyed) return undefined;
    res.setHeader(ACTION_ID_HEADER, submitted.id);
    // An error answered while the upload's body is still coming: the connection closes after it, unread.
    if (io.body && !io.body.readableEnded && result.status !== 'succeeded')
      res.setHeader('connection', 'close');
    if (inputRefusal) throw inputRefusal;
    if (result.status === 'succeeded') return result;
    // What the transfer needed is not there (the cluster refuses the exec): recorded denied, answered as the 503
    // naming it, not as a policy's 403.
    if (io.failure instanceof SwitchyardError && io.failure.kind === 'unavailable') throw io.failure;
    if (result.status === 'denied') {
      const error = result.error;
      res.status(403).json(
        errorBody(error?.code ?? 'POLICY_DENIED', error?.message ?? 'denied', [], {
          actionId: submitted.id,
        }),
      );
      return undefined;
    }
    const failure = io.failure;
    if (failure instanceof FileOpError && failure.code === 'RANGE_NOT_SATISFIABLE') {
      res
        .status(416)
        .setHeader('content-range', `bytes */${String(failure.details.size)}`)
        .json(errorBody(failure.code, failure.message, [{ path: 'Range', message: failure.message }]));
      return undefined;
    }
    if (failure instanceof Error && result.error?.code !== 'TRANSFER_ABORTED') throw failure;
    res.status(result.error?.class === 'cancelled' ? 409 : 500).json(
      errorBody(result.error?.code ?? 'TRANSFER_FAILED', result.error?.message ?? 'the transfer failed', [], {
        actionId: submitted.id,
      }),
    );
    return undefined;
  }
}

/** The HTTP response as a download's sink: status and headers from the head, then the bytes, streamed. */
function sinkOf(res: Response, contentType: string): TransferIo['sink'] & object {
  return {
    send: async (head: DownloadHead, stream: Readable) => {
      res.setHeader('content-type', contentType);
      res.setHeader(ACTION_ID_HEADER, head.actionId);
      if (head.size !== undefined) res.setHeader('accept-ranges', 'bytes');
      if (head.range && head.size !== undefined) {
        res.status(206);
        res.setHeader('content-range', `bytes ${head.range.start}-${head.range.end}/${head.size}`);
        res.setHeader('content-length', String(head.range.end - head.range.start + 1));
      } else {
        res.status(200);
        if (head.size !== undefined) res.setHeader('content-length', String(head.size));
      }
      await pipeline(stream, res);
    },
  };
}
