import { IsIn, IsObject, IsOptional } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { RequestValidationError } from '../../../platform/validation/request-validation.error';
import { validateDto } from '../../../platform/validation/validate-dto';
import { KERNELSPEC_NAMES, type KernelspecName } from '../jupyter-kernelspecs';

/** Values of `env` a refusal names, at most. */
const MAX_REPORTED = 10;
/** The one `KERNEL_*` variable the engine reads: the timeout of the kernel's cells (jupyter_server forwards it). */
export const CELL_TIMEOUT_VARIABLE = 'KERNEL_SWITCHYARD_TIMEOUT_MS';
const MILLISECONDS = /^[1-9][0-9]{0,9}$/;

/** `POST …/jupyter/api/kernels`: what jupyter_server's gateway client sends to start a kernel. */
@JSONSchema({ description: 'A Jupyter kernel to start (Jupyter’s `POST /api/kernels` body)' })
export class StartKernelDto {
  @IsOptional()
  @IsIn(KERNELSPEC_NAMES)
  @JSONSchema({ description: 'Kernelspec name (default `python3`): python3, javascript (node) or bash' })
  name?: KernelspecName;

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description:
      'The client’s `KERNEL_*` variables (jupyter_server sends them). `KERNEL_SWITCHYARD_TIMEOUT_MS` (a positive ' +
      'integer) is the kernel’s cells’ timeout, as a code action’s `timeoutMs` (capped by the engine); the others ' +
      'are accepted and not used. A cell’s environment is the session’s.',
    additionalProperties: { type: 'string' },
  })
  env?: Record<string, string>;
}

/**
 * The body validated (400 naming each field at fault; absent is `{}`), `env`'s values strings as its schema says,
 * and the cells' timeout it asks for.
 */
export function parseStartKernel(body: unknown): StartKernelDto & { cellTimeoutMs?: number } {
  const dto = validateDto(StartKernelDto, body === undefined ? {} : body);
  const env = dto.env ?? {};
  const wrong = Object.keys(env).filter((k) => typeof env[k] !== 'string');
  if (wrong.length > 0) {
    // The first few name the problem: thousands of them are not answered with thousands of fields.
    const fields = wrong
      .slice(0, MAX_REPORTED)
      .map((k) => ({ field: `env.${k}`, message: 'must be a string' }));
    throw new RequestValidationError(fields);
  }
  const timeout = env[CELL_TIMEOUT_VARIABLE];
  if (timeout === undefined) return dto;
  if (!MILLISECONDS.test(timeout)) {
    throw new RequestValidationError([
      { field: `env.${CELL_TIMEOUT_VARIABLE}`, message: 'must be a positive integer of milliseconds' },
    ]);
  }
  return { ...dto, cellTimeoutMs: Number(timeout) };
}
