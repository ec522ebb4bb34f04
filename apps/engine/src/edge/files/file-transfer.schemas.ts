import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object } from '../http/common.schemas';

/** Response schemas of the file transfer API (`FileUpload`, `ArchiveUpload`); downloads answer raw bytes. */

const ACTION_ID: SchemaObject = {
  type: 'string',
  description: 'The `file` action that recorded the transfer (op `upload` / `upload_archive`)',
  example: 'act_0123456789abcdef01234567',
};

const FILE_UPLOAD_SCHEMA: SchemaObject = object(
  ['path', 'size', 'sha256', 'actionId'],
  {
    path: { type: 'string', description: 'The path written, normalized', example: 'data/big.bin' },
    size: { type: 'integer', description: 'Bytes written' },
    sha256: { type: 'string', description: 'Hex sha256 of the bytes written', pattern: '^[0-9a-f]{64}$' },
    actionId: ACTION_ID,
  },
  'A file written from the request body, atomically',
);

const ARCHIVE_UPLOAD_SCHEMA: SchemaObject = object(
  ['path', 'files', 'directories', 'bytes', 'actionId'],
  {
    path: { type: 'string', description: 'The directory extracted into, normalized (`""`: the root)' },
    files: { type: 'integer', description: 'Files written (hard links count as the copies they become)' },
    directories: { type: 'integer', description: 'Directory entries of the archive' },
    bytes: { type: 'integer', description: 'Bytes of file content written' },
    actionId: ACTION_ID,
  },
  'A tar extracted into a directory of the workspace',
);

export const FILE_TRANSFER_SCHEMAS = {
  FileUpload: FILE_UPLOAD_SCHEMA,
  ArchiveUpload: ARCHIVE_UPLOAD_SCHEMA,
} satisfies Record<string, SchemaObject>;

/** Raw bytes in the document. */
export const BINARY: SchemaObject = { type: 'string', format: 'binary' };

/** A body of raw bytes in the document: `format: binary` under its media type. */
export const binaryContent = (mediaType: string): { content: Record<string, { schema: SchemaObject }> } => ({
  content: { [mediaType]: { schema: BINARY } },
});
