import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  Equals,
  IsArray,
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
  ValidateNested,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { PolicyDto } from '../../policies/dto/policy.dto';

export const STEP_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const MAX_STEPS = 200;

export class StepRetryDto {
  @IsInt()
  @Min(0)
  @Max(10)
  @JSONSchema({ description: 'Extra attempts after the first fails (0–10).' })
  attempts!: number;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(60_000)
  @JSONSchema({ description: 'Wait before each retry, doubled every time (default 0).' })
  backoffMs?: number;
}

export class PlanStepDto {
  @IsString()
  @Matches(STEP_ID, {
    message: 'id must be 1–64 letters, digits, "_", "." or "-", starting with a letter or digit',
  })
  id!: string;

  @IsObject()
  @JSONSchema({ description: 'The action, exactly as POST …/actions takes it.' })
  action!: Record<string, unknown>;

  @IsOptional()
  @IsArray()
  @IsString({ each: true })
  @ArrayMaxSize(MAX_STEPS)
  dependsOn?: string[];

  @IsOptional()
  @IsBoolean()
  @JSONSchema({ description: 'A failure of this step does not stop the plan; its dependents are skipped.' })
  allowFailure?: boolean;

  @IsOptional()
  @ValidateNested()
  @Type(() => StepRetryDto)
  retry?: StepRetryDto;

  @IsOptional()
  @Equals('before', { message: 'checkpoint must be "before"' })
  @JSONSchema({
    enum: ['before'],
    description:
      'Checkpoint the workspace just before the step runs; its retry attempts put the workspace back there first ' +
      '(when no other step is running), and a replan can `restoreTo` it.',
  })
  checkpoint?: 'before';
}

/** How long a plan request waits for its answer; the same for creating and replanning. */
abstract class PlanWaitDto {
  @IsOptional()
  @IsBoolean()
  @JSONSchema({
    description:
      'Answer when the plan ends or needs a replan (200), bounded by waitTimeoutMs; else 202 at once.',
  })
  wait?: boolean;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(3_600_000)
  waitTimeoutMs?: number;
}

@JSONSchema({ description: 'A DAG of actions run in dependency order.' })
export class CreatePlanDto extends PlanWaitDto {
  @IsOptional()
  @IsString()
  @MaxLength(2000)
  goal?: string;

  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_STEPS)
  @ValidateNested({ each: true })
  @Type(() => PlanStepDto)
  steps!: PlanStepDto[];

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(16)
  @JSONSchema({
    description: 'Independent steps run at once (default 1), within the session maxConcurrentActions.',
  })
  maxParallel?: number;

  @IsOptional()
  @IsIn(['each-step', 'none'])
  @JSONSchema({
    description: '`each-step`: every step runs as if it had `"checkpoint": "before"`. Default `none`.',
  })
  checkpoints?: 'each-step' | 'none';

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => PolicyDto)
  @JSONSchema({
    description:
      'The plan’s policy layer: allow/deny/ask rules for its steps, under the engine’s, tenant’s and session’s (it ' +
      'can only narrow them). A step a rule asks about waits for approval; the plan waits with it.',
  })
  policy?: PolicyDto;
}

export class ReplanDto extends PlanWaitDto {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_STEPS)
  @ValidateNested({ each: true })
  @Type(() => PlanStepDto)
  @JSONSchema({ description: 'Steps to add, or to replace steps that have not succeeded (same id).' })
  steps!: PlanStepDto[];

  @IsOptional()
  @IsString()
  @Matches(STEP_ID, { message: 'restoreTo must be the id of a step of the plan' })
  @JSONSchema({
    description:
      'Put the workspace back to the checkpoint taken before this step first ran (its latest version that ran ' +
      'with one), then resume: undo what the failed steps left. 409 when it has none or actions are running.',
  })
  restoreTo?: string;
}
