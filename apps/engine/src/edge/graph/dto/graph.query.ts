import { ACTION_STATUSES, ACTION_TYPES, type ActionStatus, type ActionType } from '@switchyard/common';
import { Transform } from 'class-transformer';
import { ArrayNotEmpty, IsIn, IsInt, IsOptional, IsString, Max, Min } from 'class-validator';
import { toInt } from '../../http/query-int';

/** `?types=code,file` and `?types=code&types=file` both give a list. */
const toList = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string' && !Array.isArray(value)) return value;
  const items: unknown[] = Array.isArray(value) ? value : [value];
  return items
    .flatMap((v) => (typeof v === 'string' ? v.split(',').map((part) => part.trim()) : [v]))
    .filter((v) => v !== '');
};

export const MAX_GRAPH_LIMIT = 10_000;

/** `GET /v1/sessions/:sessionId/graph` filters: a compact picture of a long session. */
export class GraphQuery {
  /** Any RFC 3339 date-time (what the document's `format: date-time` allows); the graph checks and normalises it. */
  @IsOptional()
  @IsString()
  since?: string;

  @IsOptional()
  @Transform(toList)
  @ArrayNotEmpty()
  @IsIn(ACTION_TYPES, { each: true })
  types?: ActionType[];

  @IsOptional()
  @Transform(toList)
  @ArrayNotEmpty()
  @IsIn(ACTION_STATUSES, { each: true })
  status?: ActionStatus[];

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(MAX_GRAPH_LIMIT)
  limit?: number;
}

/** `GET …/actions/:actionId/context`. */
export class FailureContextQueryDto {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(100)
  before?: number;
}
