import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { PolicyDto } from '../../policies/dto/policy.dto';

/** A session's network policy: what its container sandboxes may reach through the engine's egress proxy. */
export class NetworkPolicyDto {
  @IsArray()
  @ArrayMaxSize(64)
  @IsString({ each: true })
  @MinLength(1, { each: true })
  @MaxLength(260, { each: true })
  @JSONSchema({
    description:
      'Hosts the session may reach: `pypi.org`, `*.pythonhosted.org` (subdomains), `host:port` (else ports 80 and ' +
      '443). Must lie within the engine bound SWITCHYARD_EGRESS_ALLOWED (400 names the hosts beyond it). Empty: none.',
    items: { type: 'string', minLength: 1, maxLength: 260 },
  })
  allow!: string[];
}

export class CreateSessionDto {
  @IsOptional()
  @IsObject()
  @JSONSchema({
    description: 'Free-form labels kept with the session (≤ 16 KiB as JSON).',
    additionalProperties: true,
  })
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

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => NetworkPolicyDto)
  @JSONSchema({
    description:
      'Egress for the pooled and one-off tiers, through the engine policy proxy only (the subprocess tier stays ' +
      'offline). Default SWITCHYARD_EGRESS_DEFAULT (empty: no network).',
  })
  network?: NetworkPolicyDto;

  @IsOptional()
  @IsString()
  @MaxLength(63)
  @JSONSchema({
    description:
      'A sandbox template (GET /v1/templates): its packages and env for the session, whose code then runs in the ' +
      'template image in every tier (the subprocess tier on its exported root). Unknown: 400.',
  })
  template?: string;

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => PolicyDto)
  @JSONSchema({
    description:
      'The session’s policy layer: allow/deny/ask rules for its actions, under the engine’s and its tenant’s (it can ' +
      'only narrow them). GET /v1/sessions/:id/policy shows the effective policy.',
  })
  policy?: PolicyDto;
}
