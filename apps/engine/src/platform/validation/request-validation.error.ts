import { BadRequestException } from '@nestjs/common';
import { errorBody } from './error-body';

export interface FieldProblem {
  field: string;
  message: string;
}

/** A request that failed validation; lists every field at fault (as `fields[].path` in the answer). */
export class RequestValidationError extends BadRequestException {
  constructor(readonly problems: FieldProblem[]) {
    super(
      errorBody(
        'VALIDATION_FAILED',
        `invalid request: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')}`,
        problems.map((p) => ({ path: p.field, message: p.message })),
      ),
    );
  }
}
