import {
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

/** The size a terminal may have: what any screen shows, and room for a wide one. */
export const TERMINAL_COLS = { min: 1, max: 1000, default: 80 } as const;
export const TERMINAL_ROWS = { min: 1, max: 500, default: 24 } as const;
const MAX_COMMAND = 64 * 1024;

@JSONSchema({
  description:
    "A terminal in the session's sandbox: a PTY running a login bash (or `command`), with the session's environment.",
})
export class OpenTerminalDto {
  @IsOptional()
  @IsInt()
  @Min(TERMINAL_COLS.min)
  @Max(TERMINAL_COLS.max)
  @JSONSchema({ description: `Columns (default ${TERMINAL_COLS.default}).` })
  cols?: number;

  @IsOptional()
  @IsInt()
  @Min(TERMINAL_ROWS.min)
  @Max(TERMINAL_ROWS.max)
  @JSONSchema({ description: `Rows (default ${TERMINAL_ROWS.default}).` })
  rows?: number;

  @IsOptional()
  @IsString()
  @MaxLength(4096)
  @JSONSchema({
    description: 'Working directory relative to the workspace root (default, or `""`: the root).',
  })
  cwd?: string;

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_COMMAND)
  // An argument of exec cannot hold a NUL byte: refused with the request, before anything is recorded.
  // eslint-disable-next-line no-control-regex -- the one control character exec cannot take
  @Matches(/^[^\x00]*$/, { message: 'command must not contain a NUL byte' })
  @JSONSchema({
    description:
      'Run this (by `bash -c`) instead of a login shell, e.g. `htop`; the terminal ends when it does. Scored and ' +
      'matched by policies as bash code.',
  })
  command?: string;

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description:
      'Extra environment variables; loader and interpreter hooks (LD_*, NODE_OPTIONS, PATH…) are refused. `TERM` is ' +
      'the engine’s: xterm-256color.',
    additionalProperties: { type: 'string' },
  })
  env?: Record<string, string>;
}
