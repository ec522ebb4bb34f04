import { SwitchyardError } from '@switchyard/common';
import type { ExecutionEngine } from '../actions/execution-engine.service';
import {
  type FieldProblem,
  RequestValidationError,
} from '../../platform/validation/request-validation.error';
import type { Session } from '../../state/sessions/session.model';
import { cycleMessage, dagProblems, findCycle } from './plan-graph';
import type { Plan, PlanStepSpec } from '../../state/plans/plan.model';

/**
 * Checks steps before anything of them runs: the DAG (duplicate ids, unknown or self dependencies, cycles; `known`
 * are ids already in the plan) and each action as the engine would prepare it (paths, code limits). One 400 names
 * every step at fault.
 */
export function validateSteps(
  engine: ExecutionEngine,
  session: Session,
  steps: PlanStepSpec[],
  known: ReadonlySet<string>,
): void {
  const problems = dagProblems(
    steps.map((s) => ({ id: s.id, dependsOn: s.dependsOn ?? [] })),
    known,
  );
  steps.forEach((s, i) => {
    try {
      engine.check(session, s.action);
    } catch (err) {
      if (!(err instanceof SwitchyardError) || err.kind !== 'invalid_input') throw err;
      const prefix = `steps[${i}].action`;
      const field = typeof err.details.field === 'string' ? `${prefix}.${err.details.field}` : prefix;
      problems.push({ field, message: err.message });
    }
  });
  if (problems.length > 0) throw new RequestValidationError(problems);
}

/**
 * Checks a replan against the plan as it is: a step that succeeded or is running cannot be replaced, and the merged
 * plan must stay acyclic. Then the new steps are checked like new ones.
 */
export function validateReplan(
  engine: ExecutionEngine,
  session: Session,
  plan: Plan,
  steps: PlanStepSpec[],
): void {
  const byId = new Map(plan.steps.map((s) => [s.id, s]));
  const problems: FieldProblem[] = [];
  steps.forEach((s, i) => {
    const old = byId.get(s.id);
    if (old?.status === 'succeeded')
      problems.push({ field: `steps[${i}].id`, message: `step "${s.id}" already succeeded` });
    if (old?.status === 'running') {
      problems.push({
        field: `steps[${i}].id`,
        message: `step "${s.id}" is running; cancel the plan or wait for it`,
      });
    }
  });
  if (problems.length > 0) throw new RequestValidationError(problems);
  const replacing = new Set(steps.map((s) => s.id));
  const merged = [
    ...plan.steps.filter((s) => !replacing.has(s.id)).map((s) => ({ id: s.id, dependsOn: s.dependsOn })),
    ...steps.map((s) => ({ id: s.id, dependsOn: s.dependsOn ?? [] })),
  ];
  const cycle = findCycle(merged);
  if (cycle) throw new RequestValidationError([{ field: 'steps', message: cycleMessage(cycle) }]);
  validateSteps(
    engine,
    session,
    steps,
    new Set(plan.steps.map((s) => s.id).filter((id) => !replacing.has(id))),
  );
}
