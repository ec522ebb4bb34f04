import type { FileOpName } from '@switchyard/workspace';
import { Equals, IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, Min, MinLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

/** Fields every file action carries. */
abstract class FileActionBase {
  @Equals('file')
  type!: 'file';
}

class PathField extends FileActionBase {
  @IsString()
  @MinLength(1)
  @JSONSchema({ description: 'Path relative to the workspace root.' })
  path!: string;
}

class OptionalPathField extends FileActionBase {
  @IsOptional()
  @IsString()
  @JSONSchema({ description: 'Directory relative to the workspace root (default, or `""`: the root).' })
  path?: string;
}

@JSONSchema({ description: 'Read a text file, by lines.' })
export class FileReadDto extends PathField {
  @Equals('read') op!: 'read';

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(Number.MAX_SAFE_INTEGER)
  @JSONSchema({ description: 'First line to return, 1-based.' })
  offset?: number;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100_000)
  @JSONSchema({ description: 'Maximum number of lines to return.' })
  limit?: number;

  @IsOptional()
  @IsIn(['utf8', 'base64'])
  @JSONSchema({
    description:
      'base64: the whole file, base64-encoded, whatever its bytes (within the file API cap; offset and limit do ' +
      'not apply). ' +
      'Default: text by lines, or base64 when the file is not UTF-8 text.',
  })
  encoding?: 'utf8' | 'base64';
}

@JSONSchema({ description: 'Write a file atomically.' })
export class FileWriteDto extends PathField {
  @Equals('write') op!: 'write';

  @IsString()
  content!: string;

  @IsOptional()
  @IsIn(['overwrite', 'append', 'create'])
  @JSONSchema({
    description:
      'overwrite (default), append (in place: bounded by the workspace quota, not the whole-file cap), or create ' +
      '(fails if the file exists).',
  })
  mode?: 'overwrite' | 'append' | 'create';

  @IsOptional()
  @IsIn(['utf8', 'base64'])
  @JSONSchema({
    description: 'base64: content is base64 of the bytes to write (binary files). Default utf8.',
  })
  encoding?: 'utf8' | 'base64';
}

@JSONSchema({ description: 'Replace an exact string in a file.' })
export class FileEditDto extends PathField {
  @Equals('edit') op!: 'edit';

  @IsString()
  @MinLength(1)
  @JSONSchema({ description: 'The exact text to replace (not empty).' })
  find!: string;

  @IsString()
  replace!: string;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({ description: 'Replace every occurrence; otherwise more than one match is an error.' })
  all?: boolean;
}

@JSONSchema({ description: 'List a directory.' })
export class FileListDto extends OptionalPathField {
  @Equals('list') op!: 'list';

  @IsOptional()
  @IsBoolean()
  recursive?: boolean;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10_000)
  limit?: number;

  @IsOptional()
  @IsString()
  @JSONSchema({ description: 'nextCursor of the previous page.' })
  cursor?: string;
}

@JSONSchema({ description: 'Find files by glob.' })
export class FileFindDto extends OptionalPathField {
  @Equals('find') op!: 'find';

  @IsString()
  @JSONSchema({ description: 'Glob such as **/*.py.' })
  pattern!: string;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10_000)
  limit?: number;
}

@JSONSchema({ description: 'Search file contents with a regular expression; matches are path:line:text.' })
export class FileGrepDto extends OptionalPathField {
  @Equals('grep') op!: 'grep';

  @IsString()
  pattern!: string;

  @IsOptional()
  @IsString()
  @JSONSchema({ description: 'Only files matching this glob.' })
  glob?: string;

  @IsOptional()
  @IsBoolean()
  ignoreCase?: boolean;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10_000)
  limit?: number;
}

@JSONSchema({ description: 'Describe a file or directory.' })
export class FileStatDto extends PathField {
  @Equals('stat') op!: 'stat';
}

@JSONSchema({ description: 'Create a directory and its parents.' })
export class FileMkdirDto extends PathField {
  @Equals('mkdir') op!: 'mkdir';
}

@JSONSchema({ description: 'Move or rename a file or directory.' })
export class FileMoveDto extends PathField {
  @Equals('move') op!: 'move';

  @IsString()
  @MinLength(1)
  to!: string;

  @IsOptional()
  @IsBoolean()
  overwrite?: boolean;
}

@JSONSchema({ description: 'Delete a file, or a directory when recursive is true.' })
export class FileDeleteDto extends PathField {
  @Equals('delete') op!: 'delete';

  @IsOptional()
  @IsBoolean()
  recursive?: boolean;
}

export const FILE_ACTION_DTOS = {
  read: FileReadDto,
  write: FileWriteDto,
  edit: FileEditDto,
  list: FileListDto,
  find: FileFindDto,
  grep: FileGrepDto,
  stat: FileStatDto,
  mkdir: FileMkdirDto,
  move: FileMoveDto,
  delete: FileDeleteDto,
} satisfies Record<FileOpName, new () => FileActionBase>;

export type FileActionDto = InstanceType<(typeof FILE_ACTION_DTOS)[FileOpName]>;
