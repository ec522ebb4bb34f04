import { parseActionRequest } from '../../../engine/actions/dto/action-body';
import {
  type FieldProblem,
  RequestValidationError,
} from '../../../platform/validation/request-validation.error';
import type { PlanStepSpec } from '../../../state/plans/plan.model';
import type { PlanStepDto } from './plan.dto';

/**
 * The plan edge's conversion: each step's action validated as `POST …/actions` validates it and turned into the
 * engine's request type. One 400 names every step action at fault (`steps[i].action.<field>`).
 */
export function parsePlanSteps(steps: PlanStepDto[]): PlanStepSpec[] {
  const problems: FieldProblem[] = [];
  const specs = steps.map((s, i): PlanStepSpec | undefined => {
    try {
      return { ...s, action: parseActionRequest(s.action) };
    } catch (err) {
      if (!(err instanceof RequestValidationError)) throw err;
      const prefix = `steps[${i}].action`;
      problems.push(...err.problems.map((p) => ({ field: `${prefix}.${p.field}`, message: p.message })));
      return undefined;
    }
  });
  if (problems.length > 0) throw new RequestValidationError(problems);
  return specs as PlanStepSpec[];
}
