import { IsOptional, IsString, Matches } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export class CheckpointDiffQuery {
  @IsOptional()
  @IsString()
  @Matches(/^(current|chk_[0-9a-f]{24})$/, { message: 'to must be "current" or a checkpoint id (chk_…)' })
  @JSONSchema({
    description: '`current` (default): the workspace now; or another checkpoint of the session.',
  })
  to?: string;
}
