import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

/** A terminal's token is for opening its WebSocket now: minutes, not hours. */
export const TERMINAL_TOKEN_SECONDS = { min: 1, max: 3600, default: 300 } as const;

@JSONSchema({
  description: "A token for a client that cannot send an Authorization header (a browser's WebSocket).",
})
export class TerminalTokenDto {
  @IsOptional()
  @IsInt()
  @Min(TERMINAL_TOKEN_SECONDS.min)
  @Max(TERMINAL_TOKEN_SECONDS.max)
  @JSONSchema({
    description: `How long it can be used to attach (default ${TERMINAL_TOKEN_SECONDS.default} s); an attached client stays.`,
  })
  ttlSeconds?: number;
}
