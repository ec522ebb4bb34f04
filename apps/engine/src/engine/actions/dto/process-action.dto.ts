import { TIERS, type TierRequest } from '@switchyard/common';
import { PROCESS_SIGNALS, type ProcessSignal } from '@switchyard/sandbox';
import {
  Equals,
  IsBoolean,
  IsIn,
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

/** The longest wait a timer can hold (Node fires a longer one at once). */
const MAX_WAIT_MS = 2_147_483_647;

export const PROCESS_OPS = ['start', 'list', 'logs', 'write', 'signal', 'stop', 'wait'] as const;
export type ProcessOp = (typeof PROCESS_OPS)[number];

/** A process name: what `logs`, `stop`… may use instead of the id. */
export const PROCESS_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const MAX_COMMAND = 64 * 1024;
const MAX_STDIN = 1024 * 1024;

/** Fields every process action carries. */
abstract class ProcessActionBase {
  @Equals('process')
  type!: 'process';
}

/** A process named by its id or its name. */
abstract class ProcessTarget extends ProcessActionBase {
  @IsString()
  @MinLength(1)
  @MaxLength(128)
  @JSONSchema({ description: 'The process: its id (`prc_…`, from `start`) or its name.' })
  processId!: string;
}

@JSONSchema({
  description:
    "Start a background process (a shell command) in the session's stateful sandbox; it keeps running between " +
    'actions, and code run with state "session" in the same tier reaches it on localhost.',
})
export class ProcessStartDto extends ProcessActionBase {
  @Equals('start') op!: 'start';

  @IsString()
  @MinLength(1)
  @MaxLength(MAX_COMMAND)
  @JSONSchema({ description: 'The command, run by bash: `python3 -m http.server 8000`.' })
  command!: string;

  @IsOptional()
  @IsString()
  @Matches(PROCESS_NAME, {
    message: 'name must be 1–64 letters, digits, "_", "." or "-", starting with one of the first two',
  })
  @JSONSchema({ description: "A name to refer to it by (unique among the session's running processes)." })
  name?: string;

  @IsOptional()
  @IsString()
  @JSONSchema({
    description: 'Working directory relative to the workspace root (default, or `""`: the root).',
  })
  cwd?: string;

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description:
      'Extra environment variables; loader and interpreter hooks (LD_*, NODE_OPTIONS, PATH…) are refused.',
    additionalProperties: { type: 'string' },
  })
  env?: Record<string, string>;

  @IsOptional()
  @IsIn(['auto', ...TIERS])
  @JSONSchema({
    description:
      'auto (default): the tier the risk policy picks for the command as bash code; a stronger one may be asked for.',
  })
  tier?: TierRequest;
}

@JSONSchema({ description: "List the session's background processes, running and ended." })
export class ProcessListDto extends ProcessActionBase {
  @Equals('list') op!: 'list';
}

@JSONSchema({ description: "A process's output: the last `tail` chunks, or those after `sinceSeq`." })
export class ProcessLogsDto extends ProcessTarget {
  @Equals('logs') op!: 'logs';

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10_000)
  @JSONSchema({ description: 'Only the last N output chunks (default: everything kept).' })
  tail?: number;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(Number.MAX_SAFE_INTEGER)
  @JSONSchema({ description: 'Only chunks with a higher seq than this (as returned by an earlier call).' })
  sinceSeq?: number;
}

@JSONSchema({ description: "Write text to a process's standard input." })
export class ProcessWriteDto extends ProcessTarget {
  @Equals('write') op!: 'write';

  @IsString()
  @MaxLength(MAX_STDIN)
  @JSONSchema({ description: 'Text to write (UTF-8).' })
  data!: string;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({ description: 'Close its standard input after writing.' })
  eof?: boolean;
}

@JSONSchema({ description: "Send a signal to a process's whole process group." })
export class ProcessSignalDto extends ProcessTarget {
  @Equals('signal') op!: 'signal';

  @IsIn(PROCESS_SIGNALS)
  @JSONSchema({ description: `One of ${PROCESS_SIGNALS.join(', ')}.` })
  signal!: ProcessSignal;
}

@JSONSchema({ description: 'Stop a process and everything it started: TERM, then KILL after graceMs.' })
export class ProcessStopDto extends ProcessTarget {
  @Equals('stop') op!: 'stop';

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(60_000)
  @JSONSchema({ description: 'How long to wait after TERM before KILL (default 2000).' })
  graceMs?: number;
}

@JSONSchema({ description: 'Wait until a process exits, or timeoutMs passes.' })
export class ProcessWaitDto extends ProcessTarget {
  @Equals('wait') op!: 'wait';

  @IsInt()
  @Min(1)
  @Max(MAX_WAIT_MS)
  @JSONSchema({ description: 'Longest wait in milliseconds (at most 2 147 483 647, about 24.8 days).' })
  timeoutMs!: number;
}

export const PROCESS_ACTION_DTOS = {
  start: ProcessStartDto,
  list: ProcessListDto,
  logs: ProcessLogsDto,
  write: ProcessWriteDto,
  signal: ProcessSignalDto,
  stop: ProcessStopDto,
  wait: ProcessWaitDto,
} satisfies Record<ProcessOp, new () => ProcessActionBase>;

export type ProcessActionDto = InstanceType<(typeof PROCESS_ACTION_DTOS)[ProcessOp]>;
