import { LANGUAGES, type Language } from '@switchyard/common';
import { STATEFUL_TIERS, type StatefulTier } from '@switchyard/sandbox';
import { Equals, IsIn, IsOptional } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export const KERNEL_OPS = ['restart'] as const;

@JSONSchema({
  description:
    "Restart the session's kernel(s) of a language: fresh interpreter, state cleared (variables, imports, cwd). " +
    'Kernels are otherwise managed under /v1/sessions/{id}/kernels.',
})
export class KernelRestartDto {
  @Equals('kernel')
  type!: 'kernel';

  @Equals('restart') op!: 'restart';

  @IsIn(LANGUAGES)
  @JSONSchema({ description: `The kernel's language: ${LANGUAGES.join(', ')}.` })
  language!: Language;

  @IsOptional()
  @IsIn(STATEFUL_TIERS)
  @JSONSchema({ description: 'Only the kernel in this tier (default: every kernel of the language).' })
  tier?: StatefulTier;
}

export const KERNEL_ACTION_DTOS = { restart: KernelRestartDto } satisfies Record<
  (typeof KERNEL_OPS)[number],
  new () => object
>;

export type KernelActionDto = KernelRestartDto;
