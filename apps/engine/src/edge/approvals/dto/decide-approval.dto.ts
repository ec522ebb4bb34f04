import { IsOptional, IsString, MaxLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

/** A decision's reason, recorded with it in the graph. */
export class DecideApprovalDto {
  @IsOptional()
  @IsString()
  @MaxLength(1000)
  @JSONSchema({
    description: 'Why: recorded with the decision (and, for a rejection, in the action’s error)',
  })
  reason?: string;
}
