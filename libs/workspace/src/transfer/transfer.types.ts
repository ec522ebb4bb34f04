import type { Readable } from 'node:stream';

/** An inclusive byte range of a file (`Range: bytes=start-end`); `end` absent: to the end of the file. */
export interface ByteRange {
  start: number;
  end?: number;
}

/** A file on its way out of a workspace: its whole size, and the bytes asked for as a stream. */
export interface FileReadStream {
  /** The file's whole size in bytes (not the range's). */
  size: number;
  mtimeMs: number;
  /** The first and last byte the stream carries (inclusive); `end` is `start - 1` for an empty file. */
  start: number;
  end: number;
  /** The range's bytes (the whole file without one); the caller must consume or destroy it. */
  stream: Readable;
}

/** What a streamed write put in the workspace. */
export interface FileWriteResult {
  /** The normalized path written. */
  path: string;
  size: number;
  /** Hex sha256 of the bytes written. */
  sha256: string;
  /** The real path (symlinks resolved), for the graph. */
  realPath: string;
}

/** What an archive upload put in the workspace. */
export interface ArchiveWriteResult {
  /** The normalized directory extracted into (`''`: the root). */
  path: string;
  files: number;
  directories: number;
  /** Bytes of file content written. */
  bytes: number;
}

/** A directory on its way out as a tar. */
export interface ArchiveReadStream {
  /** The normalized directory (`''`: the root). */
  path: string;
  /** The tar; the caller must consume or destroy it. */
  stream: Readable;
}
