import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { ACCESS_TOKEN_DEFAULT_SECONDS, ACCESS_TOKEN_MAX_SECONDS } from '../../http/access-tokens';

@JSONSchema({
  description:
    "A preview link to a port of the session: a URL a browser opens without the session's API key.",
})
export class PortPreviewDto {
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(ACCESS_TOKEN_MAX_SECONDS)
  @JSONSchema({
    description: `How long the link's token is valid, in seconds (default ${ACCESS_TOKEN_DEFAULT_SECONDS}, at most ${ACCESS_TOKEN_MAX_SECONDS}).`,
  })
  ttlSeconds?: number;
}
