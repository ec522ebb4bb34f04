import { IsBoolean, IsObject, IsOptional, IsString, MaxLength } from 'class-validator';
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
}
