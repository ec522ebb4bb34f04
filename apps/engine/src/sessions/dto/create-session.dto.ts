import { IsInt, IsObject, IsOptional, Max, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export class CreateSessionDto {
  @IsOptional()
  @IsObject()
  @JSONSchema({ description: 'Free-form labels kept with the session (≤ 16 KiB as JSON).' })
  metadata?: Record<string, unknown>;

  @IsOptional()
  @IsInt()
  @Min(1)
  @JSONSchema({ description: 'Idle time after which the session expires (default 3600).' })
  ttlSeconds?: number;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(16)
  @JSONSchema({
    description:
      'Actions of the session that may run at once (default 1, SWITCHYARD_SESSION_CONCURRENCY): more lets a plan run independent steps in parallel.',
  })
  maxConcurrentActions?: number;
}
