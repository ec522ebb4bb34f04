import type { Plan, PlanStep } from './plan.model';

/**
 * A plan as its stores keep it: the document (status, steps' states, attempts) apart from the steps' actions. A
 * plan is saved at every step transition, and its actions may hold megabytes of code each: serialising and writing
 * them again at every save held the event loop ~70 ms a save for a plan of 7 × 1 MiB steps. An action is written
 * once, when a save first meets it (a replan's new version is a new action); the document holds a reference in its
 * place, so every key keeps its order.
 */
export interface SplitPlan {
  /** The plan's JSON with each step action replaced by `{"$action": key}`. */
  doc: string;
  /** The actions this save writes (those `written` did not hold yet): by key, as JSON. */
  actions: Array<{ key: string; json: string }>;
  /** Adds this save's actions to `written`: called once they are stored (a failed save writes them again next time). */
  stored(): void;
}

/** An action's key in its plan: the step's id and version (one version's action never changes). */
const keyOf = (step: Pick<PlanStep, 'id' | 'version'>): string => `${step.id}@${step.version}`;

interface ActionRef {
  $action: string;
}

const isRef = (value: unknown): value is ActionRef =>
  typeof value === 'object' &&
  value !== null &&
  Object.keys(value).length === 1 &&
  typeof (value as ActionRef).$action === 'string';

/** Every version of every step (the current ones and those they replaced). */
function* versionsOf<S extends { replaced?: unknown[] }>(steps: S[]): Generator<Record<string, unknown>> {
  for (const step of steps) {
    yield step;
    for (const old of step.replaced ?? []) yield old as Record<string, unknown>;
  }
}

/**
 * Splits `plan` for a save. `written` holds the action objects already in the store (by identity: the executor never
 * changes an action once its step is made); the actions it does not hold are returned to write.
 */
export function splitPlan(plan: Plan, written: WeakSet<object>): SplitPlan {
  const actions: SplitPlan['actions'] = [];
  const steps = plan.steps.map((step) => {
    const ref = (s: Omit<PlanStep, 'replaced'>) => {
      const key = keyOf(s);
      if (!written.has(s.action)) actions.push({ key, json: JSON.stringify(s.action) });
      return { ...s, action: { $action: key } };
    };
    const current = ref(step);
    return step.replaced ? { ...current, replaced: step.replaced.map(ref) } : current;
  });
  const doc = JSON.stringify({ ...plan, steps });
  const objects = [...versionsOf(plan.steps)].map((v) => v.action as object);
  return { doc, actions, stored: () => objects.forEach((a) => written.add(a)) };
}

/**
 * The plan a stored document and its actions make; a document stored before actions were kept apart holds them
 * itself. Throws when a referenced action is missing (a store that lost rows).
 */
export function joinPlan(doc: Plan, actions: ReadonlyMap<string, unknown>): Plan {
  for (const v of versionsOf(doc.steps)) {
    if (!isRef(v.action)) continue;
    const key = v.action.$action;
    if (!actions.has(key))
      throw new Error(`plan ${doc.id}: the action of step ${key} is missing from the store`);
    v.action = actions.get(key);
  }
  return doc;
}
