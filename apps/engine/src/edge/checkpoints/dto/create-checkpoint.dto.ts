import { IsOptional, IsString, MaxLength } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

@JSONSchema({ description: "A checkpoint of the session's workspace as it is now." })
export class CreateCheckpointDto {
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @JSONSchema({ description: 'A name for it (≤ 200 characters), kept on the checkpoint and its graph node.' })
  label?: string;
}
