import { IsInt, IsObject, IsOptional, Min } from 'class-validator';
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
}
