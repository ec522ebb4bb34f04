import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { SwitchyardClient } from './client';
import { extractTo, packDirectory } from './local-tar';
import { actionError } from './sandbox-commands';
import type { components } from './generated/schema';
import type { ArchiveUpload, FileUpload, UploadBody } from './types';

type FileOutput = components['schemas']['FileOutput'];
type ListOutput = Exclude<Extract<FileOutput, { entries: unknown }>, { nextSeq: number }>;
type StatOutput = Extract<FileOutput, { mtime: string }>;

/** One entry of a directory listing, its path relative to the workspace. */
export type EntryInfo = ListOutput['entries'][number];

/** What `files.write` takes: text, bytes, a Blob, a web `ReadableStream` or a Node `Readable` (streamed). */
export type WriteData = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | Readable;

/** What `files.upload`/`files.download` did: one file, or a directory's entries as a tar. */
export type TransferInfo =
  | ({ kind: 'file' } & Pick<FileUpload, 'path' | 'size'> & Partial<Pick<FileUpload, 'sha256' | 'actionId'>>)
  | ({ kind: 'directory' } & Pick<ArchiveUpload, 'path' | 'files' | 'directories' | 'bytes'> &
      Partial<Pick<ArchiveUpload, 'actionId'>>);

const isListing = (output: unknown): output is ListOutput =>
  typeof output === 'object' && output !== null && 'entries' in output && !('nextSeq' in output);

function uploadBody(data: WriteData): UploadBody {
  return data instanceof Readable ? Readable.toWeb(data) : data;
}

/**
 * The sandbox's workspace files. `read` and `write` stream raw bytes (`GET`/`PUT …/files/content`, any size up to
 * the workspace quota); `upload`/`download` move a local file or a whole directory (as a tar, `…/files/archive`);
 * `list` is the `file` action's listing. Paths are relative to the workspace root.
 */
export class Files {
  constructor(
    private readonly client: SwitchyardClient,
    private readonly sessionId: string,
  ) {}

  read(filePath: string, options?: { format?: 'text'; signal?: AbortSignal }): Promise<string>;
  read(filePath: string, options: { format: 'bytes'; signal?: AbortSignal }): Promise<Uint8Array>;
  read(
    filePath: string,
    options: { format: 'stream'; signal?: AbortSignal },
  ): Promise<ReadableStream<Uint8Array>>;
  async read(
    filePath: string,
    options: { format?: 'text' | 'bytes' | 'stream'; signal?: AbortSignal } = {},
  ): Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    const response = await this.client.files.download(this.sessionId, filePath, { signal: options.signal });
    switch (options.format ?? 'text') {
      case 'bytes':
        return new Uint8Array(await response.arrayBuffer());
      case 'stream':
        if (!response.body) throw new Error(`GET files/content for ${filePath} answered no body`);
        return response.body;
      case 'text':
        return response.text();
    }
  }

  /** Writes the file whole (parents made, atomic replace); `overwrite: false` refuses an existing one (409). */
  write(filePath: string, data: WriteData, options: { overwrite?: boolean } = {}): Promise<FileUpload> {
    return this.client.files.upload(this.sessionId, filePath, uploadBody(data), options);
  }

  /** The entries of a directory (default: the workspace root), every page of them. */
  async list(dirPath = '', options: { recursive?: boolean } = {}): Promise<EntryInfo[]> {
    const entries: EntryInfo[] = [];
    let cursor: string | undefined;
    do {
      const action = await this.client.actions.run(this.sessionId, {
        type: 'file',
        op: 'list',
        path: dirPath,
        ...(options.recursive && { recursive: true }),
        ...(cursor !== undefined && { cursor }),
      });
      const output = action.output;
      if (action.status !== 'succeeded' || !isListing(output))
        throw actionError(action, `cannot list ${dirPath || 'the workspace'}`);
      entries.push(...output.entries);
      cursor = output.nextCursor;
    } while (cursor !== undefined);
    return entries;
  }

  /** Whether the path exists in the workspace, and what it is. */
  async stat(filePath: string): Promise<StatOutput> {
    const action = await this.client.actions.run(this.sessionId, {
      type: 'file',
      op: 'stat',
      path: filePath,
    });
    const output = action.output;
    if (action.status !== 'succeeded' || !output || !('mtime' in output))
      throw actionError(action, `cannot stat ${filePath}`);
    return output;
  }

  /**
   * Sends a local file, or a local directory as a tar extracted at `remotePath` (made when missing), streamed:
   * nothing is held whole in memory. Symbolic links and special files in a directory are left out.
   */
  async upload(localPath: string, remotePath: string): Promise<TransferInfo> {
    if ((await stat(localPath)).isDirectory()) {
      const body = Readable.toWeb(packDirectory(localPath));
      return {
        kind: 'directory',
        ...(await this.client.files.uploadArchive(this.sessionId, remotePath, body)),
      };
    }
    return { kind: 'file', ...(await this.write(remotePath, createReadStream(localPath))) };
  }

  /**
   * Fetches a workspace file to `localPath` (into it when it is an existing directory), or a workspace directory
   * as a tar extracted into `localPath` (made when missing), streamed.
   */
  async download(remotePath: string, localPath: string): Promise<TransferInfo> {
    const remote = await this.stat(remotePath);
    if (remote.type === 'dir') {
      const response = await this.client.files.downloadArchive(this.sessionId, remotePath);
      if (!response.body) throw new Error(`GET files/archive for ${remotePath} answered no body`);
      const summary = await extractTo(localPath, Readable.fromWeb(response.body));
      return { kind: 'directory', path: remote.path, ...summary };
    }
    const target = (await stat(localPath).catch(() => undefined))?.isDirectory()
      ? path.join(localPath, path.posix.basename(remote.path))
      : localPath;
    const response = await this.client.files.download(this.sessionId, remotePath);
    if (!response.body) throw new Error(`GET files/content for ${remotePath} answered no body`);
    await pipeline(Readable.fromWeb(response.body), createWriteStream(target));
    const actionId = response.headers.get('x-switchyard-action-id') ?? undefined;
    return {
      kind: 'file',
      path: remote.path,
      size: (await stat(target)).size,
      ...(actionId && { actionId }),
    };
  }
}
