import { LANGUAGES, TIERS, type Language, type TierRequest } from '@switchyard/common';
import { CODE_STATES, type CodeState } from '@switchyard/sandbox';
import { Equals, IsIn, IsInt, IsObject, IsOptional, IsString, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

@JSONSchema({
  description: 'Run code in a sandbox tier chosen by the risk policy.',
  // A kernel reads no input: `stdin` goes with `state: "fresh"` only.
  not: {
    required: ['state', 'stdin'],
    properties: { state: { type: 'string', enum: ['session'] }, stdin: { type: 'string' } },
  },
})
export class CodeActionDto {
  @Equals('code')
  type!: 'code';

  @IsIn(LANGUAGES)
  @JSONSchema({ description: 'Interpreter: python, node or bash.' })
  language!: Language;

  @IsString()
  @JSONSchema({ description: 'Source code to run; the working directory is the session workspace.' })
  code!: string;

  @IsOptional()
  @IsString()
  @JSONSchema({ description: 'Text written to the program on standard input.' })
  stdin?: string;

  @IsOptional()
  @IsInt()
  @Min(1)
  @JSONSchema({ description: 'Wall-clock limit in milliseconds (default 30000, capped by the engine).' })
  timeoutMs?: number;

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description:
      'Extra environment variables. Loader and interpreter hooks (LD_*, NODE_OPTIONS, PATH…) are refused.',
    additionalProperties: { type: 'string' },
  })
  env?: Record<string, string>;

  @IsOptional()
  @IsIn(['auto', ...TIERS])
  @JSONSchema({ description: 'auto (default) lets the risk policy choose; a stronger tier may be forced.' })
  tier?: TierRequest;

  @IsOptional()
  @IsIn(CODE_STATES)
  @JSONSchema({
    description:
      "fresh (default): a new interpreter for this action. session: the session's kernel for the language, which " +
      'keeps variables, imports and functions (python, node) or cwd, exports and functions (bash) between actions; ' +
      "the answer names it in output.kernel and gives the last expression's value as output.result.",
  })
  state?: CodeState;
}
