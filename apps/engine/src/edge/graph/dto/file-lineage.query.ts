import { IsString, MaxLength, MinLength } from 'class-validator';

/** `GET …/files/lineage?path=src/app.py`. */
export class FileLineageQuery {
  @IsString()
  @MinLength(1)
  @MaxLength(4096)
  path!: string;
}
