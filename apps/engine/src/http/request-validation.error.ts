import { BadRequestException } from '@nestjs/common';

export interface FieldProblem {
  field: string;
  message: string;
}

/** A request body that failed validation; lists every field at fault. */
export class RequestValidationError extends BadRequestException {
  constructor(readonly problems: FieldProblem[]) {
    super({
      message: `invalid request: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`,
      code: 'VALIDATION_FAILED',
      errors: problems,
    });
  }
}
