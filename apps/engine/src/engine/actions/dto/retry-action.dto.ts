import { Equals, IsBoolean, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

@JSONSchema({ description: 'Retry an action, as it was or revised; the new action is linked by RETRY_OF.' })
export class RetryActionDto {
  @IsOptional()
  @IsObject()
  @JSONSchema({ description: 'The revised action (any action body); the original input when omitted.' })
  action?: Record<string, unknown>;

  @IsOptional()
  @IsString()
  @MaxLength(2000)
  @JSONSchema({ description: 'Why it is retried; kept on the RETRY_OF edge.' })
  reason?: string;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({
    description:
      "Run one tier up (subprocess → pooled → container); only after a failure on the tier's limits (timeout, limit).",
  })
  escalate?: boolean;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({ description: 'false: answer 202 with the new action id at once.' })
  wait?: boolean;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({
    description:
      'Put the workspace back to the checkpoint taken before the original action (or the nearest action of its ' +
      'retry chain with one) before running the retry: the undo of a reflection loop.',
  })
  restore?: boolean;

  @IsOptional()
  @Equals('before', { message: 'checkpoint must be "before"' })
  @JSONSchema({ enum: ['before'], description: 'Checkpoint the workspace just before the retry runs.' })
  checkpoint?: 'before';
}
