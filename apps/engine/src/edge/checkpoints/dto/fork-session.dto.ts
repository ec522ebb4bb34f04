import { IsOptional, IsString, MaxLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

@JSONSchema({ description: 'A new session whose workspace is a copy of this one, now or at a checkpoint.' })
export class ForkSessionDto {
  @IsOptional()
  @IsString()
  @MaxLength(64)
  @JSONSchema({
    description: 'Copy the workspace as it was at this checkpoint of the session (default: as it is now).',
  })
  checkpointId?: string;
}
