import { ActionsEnv } from './actions-env';
import { BrowserEnv } from './browser-env';
import { ConfigError, type ConfigProblem } from './config-error';
import { ContainerEnv } from './container-env';
import { parseEnvSection } from './env-parsing';
import { GraphEnv } from './graph-env';
import { HttpEnv } from './http-env';
import { NetworkEnv } from './network-env';
import { HooksEnv } from './hooks-env';
import { PolicyEnv } from './policy-env';
import { PortsEnv } from './ports-env';
import { KubernetesEnv } from './kubernetes-env';
import { SkillsEnv } from './skills-env';
import { StateEnv } from './state-env';
import { RedactionEnv } from './redaction-env';
import { SandboxEnv } from './sandbox-env';
import { StatefulEnv } from './stateful-env';
import { TemplatesEnv } from './templates-env';
import { WorkspaceEnv } from './workspace-env';

/**
 * Every environment variable the engine reads, with its default, one schema class per area. Validated once at
 * boot; a bad value stops start-up naming the variable. The reference at docs/reference/configuration.md is
 * generated from these classes (`scripts/config-reference.mjs`), JSDoc included.
 */
export const ENGINE_ENV_SCHEMAS = [
  HttpEnv,
  SandboxEnv,
  StatefulEnv,
  PortsEnv,
  NetworkEnv,
  ContainerEnv,
  TemplatesEnv,
  WorkspaceEnv,
  BrowserEnv,
  ActionsEnv,
  RedactionEnv,
  GraphEnv,
  PolicyEnv,
  HooksEnv,
  SkillsEnv,
  KubernetesEnv,
  StateEnv,
] as const;

/** The whole environment, parsed. */
export type EngineEnv = HttpEnv &
  SandboxEnv &
  StatefulEnv &
  PortsEnv &
  NetworkEnv &
  ContainerEnv &
  TemplatesEnv &
  WorkspaceEnv &
  BrowserEnv &
  ActionsEnv &
  RedactionEnv &
  GraphEnv &
  PolicyEnv &
  HooksEnv &
  SkillsEnv &
  KubernetesEnv &
  StateEnv;

type NumericVariable = {
  [K in keyof EngineEnv]-?: EngineEnv[K] extends number | undefined ? K : never;
}[keyof EngineEnv];

/** `[variable, bound]`: the variable, when set, must not exceed the bound. */
const CEILINGS: ReadonlyArray<readonly [NumericVariable, NumericVariable]> = [
  ['SWITCHYARD_DEFAULT_TIMEOUT_MS', 'SWITCHYARD_MAX_TIMEOUT_MS'],
  ['SWITCHYARD_POOL_MIN', 'SWITCHYARD_POOL_MAX'],
  ['SWITCHYARD_BROWSER_TIMEOUT_MS', 'SWITCHYARD_MAX_TIMEOUT_MS'],
  ['SWITCHYARD_BROWSER_MAX_DEDICATED', 'SWITCHYARD_BROWSER_MAX_CONTEXTS'],
  ['SWITCHYARD_SESSION_TTL_SECONDS', 'SWITCHYARD_MAX_SESSION_TTL_SECONDS'],
  ['SWITCHYARD_CHECKPOINT_KEEP_AUTO', 'SWITCHYARD_MAX_CHECKPOINTS'],
];

/**
 * `[variable, bound]`: the variable, when set, must not be below the bound. The default timeout is lowered to a
 * tier's maximum, which would only surprise whoever set it: refused instead.
 */
const FLOORS: ReadonlyArray<readonly [NumericVariable, NumericVariable]> = [
  ['SWITCHYARD_POOLED_MAX_TIMEOUT_MS', 'SWITCHYARD_DEFAULT_TIMEOUT_MS'],
  ['SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS', 'SWITCHYARD_DEFAULT_TIMEOUT_MS'],
];

/** The checks between variables, once each is valid on its own. */
function crossCheck(env: EngineEnv): ConfigProblem[] {
  const exceeds = (a: number | undefined, b: number | undefined): boolean =>
    a !== undefined && b !== undefined && a > b;
  const above = CEILINGS.filter(([variable, bound]) => exceeds(env[variable], env[bound]));
  const below = FLOORS.filter(([variable, bound]) => exceeds(env[bound], env[variable]));
  return [
    ...above.map(([variable, bound]) => ({ variable, message: `must not exceed ${bound}` })),
    ...below.map(([variable, bound]) => ({ variable, message: `must not be below ${bound}` })),
    ...(env.SWITCHYARD_SANDBOX_BACKEND === 'kubernetes' && env.SWITCHYARD_SANDBOX_CA_FILE !== undefined
      ? [
          {
            variable: 'SWITCHYARD_SANDBOX_CA_FILE',
            message:
              'is not supported with SWITCHYARD_SANDBOX_BACKEND=kubernetes: the file is bound into sandboxes from ' +
              "the engine's host, which pods on other nodes do not share; unset one of the two",
          },
        ]
      : []),
    ...replicaConflicts(env),
  ];
}

/** Replicas share only what every one of them reaches: Neo4j for the graph, the cluster for the sandboxes. */
function replicaConflicts(env: EngineEnv): ConfigProblem[] {
  if (env.SWITCHYARD_STATE !== 'postgres') return [];
  const problems: ConfigProblem[] = [];
  if (env.SWITCHYARD_GRAPH !== 'neo4j') {
    problems.push({
      variable: 'SWITCHYARD_GRAPH',
      message:
        "must be neo4j with SWITCHYARD_STATE=postgres: replicas share one graph, and the embedded one is a replica's own file",
    });
  }
  if (env.SWITCHYARD_SANDBOX_BACKEND !== 'kubernetes') {
    problems.push({
      variable: 'SWITCHYARD_SANDBOX_BACKEND',
      message:
        'must be kubernetes with SWITCHYARD_STATE=postgres: a replica takes over the sessions of one that died, ' +
        "which needs their sandboxes in a cluster every replica reaches (Docker's are on one host's disk)",
    });
  }
  return problems;
}

/** Reads and validates every variable. Throws `ConfigError` naming every bad one. */
export function parseEngineEnv(env: NodeJS.ProcessEnv): EngineEnv {
  const sections = ENGINE_ENV_SCHEMAS.map((schema) => parseEnvSection<object>(schema, env));
  const problems = sections.flatMap((s) => s.problems);
  if (problems.length > 0) throw new ConfigError(problems);
  const parsed = Object.assign({}, ...sections.map((s) => s.parsed)) as EngineEnv;
  const conflicts = crossCheck(parsed);
  if (conflicts.length > 0) throw new ConfigError(conflicts);
  return parsed;
}
