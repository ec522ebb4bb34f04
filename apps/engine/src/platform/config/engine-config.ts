import { type ActionsConfig, actionsConfig } from './actions-env';
import { type BrowserConfig, browserConfig } from './browser-env';
import { type ContainerTiersConfig, containerTiersConfig } from './container-env';
import { parseEngineEnv } from './engine-env';
import { type GraphConfig, graphConfig } from './graph-env';
import { type HttpConfig, httpConfig } from './http-env';
import { type NetworkConfig, networkConfig } from './network-env';
import { type HooksConfig, hooksConfig } from './hooks-env';
import { type PolicyConfig, policyConfig } from './policy-env';
import { type PortsConfig, portsConfig } from './ports-env';
import { type KubernetesConfig, kubernetesConfig } from './kubernetes-env';
import { type SkillsConfig, skillsConfig } from './skills-env';
import { type StateConfig, stateConfig } from './state-env';
import { type RedactionConfig, redactionConfig } from './redaction-env';
import { type SandboxConfig, sandboxConfig } from './sandbox-env';
import { type StatefulConfig, statefulConfig } from './stateful-env';
import { type TemplatesConfig, templatesConfig } from './templates-env';
import { type WorkspaceConfig, workspaceConfig } from './workspace-env';

export { ConfigError, type ConfigProblem } from './config-error';
export type { ContainerTierConfig } from './container-env';
export { type EngineEnv, ENGINE_ENV_SCHEMAS } from './engine-env';
export type { GraphConfig } from './graph-env';
export type { PortsConfig } from './ports-env';
export type { StateConfig } from './state-env';
export { LOG_LEVELS, type LogFormat, type LogLevel } from './http-env';
export type { RiskThresholdConfig } from './sandbox-env';

/**
 * The validated configuration, one object for the whole engine: the only place the environment is read (the
 * libraries get what they need from here).
 */
export interface EngineConfig extends HttpConfig {
  sandbox: SandboxConfig & ContainerTiersConfig & { stateful: StatefulConfig };
  workspace: WorkspaceConfig;
  ports: PortsConfig;
  browser: BrowserConfig;
  redaction: RedactionConfig;
  actions: ActionsConfig;
  graph: GraphConfig;
  network: NetworkConfig;
  templates: TemplatesConfig;
  policy: PolicyConfig;
  hooks: HooksConfig;
  skills: SkillsConfig;
  kubernetes: KubernetesConfig;
  state: StateConfig;
}

/**
 * Reads and validates the environment. Throws `ConfigError` naming every bad variable. Relative paths (the data
 * dir, the tools file, the sandbox image's tag file) are taken from `cwd`.
 */
export function loadEngineConfig(
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): EngineConfig {
  const parsed = parseEngineEnv(env);
  return {
    ...httpConfig(parsed, cwd),
    sandbox: {
      ...sandboxConfig(parsed),
      ...containerTiersConfig(parsed, cwd),
      stateful: statefulConfig(parsed, cwd),
    },
    workspace: workspaceConfig(parsed),
    ports: portsConfig(parsed),
    browser: browserConfig(parsed),
    redaction: redactionConfig(parsed, env),
    actions: actionsConfig(parsed),
    graph: graphConfig(parsed),
    network: networkConfig(parsed),
    templates: templatesConfig(parsed, cwd, parsed.SWITCHYARD_SANDBOX_IMAGE),
    policy: policyConfig(parsed, cwd),
    hooks: hooksConfig(parsed, cwd),
    skills: skillsConfig(parsed, cwd),
    kubernetes: kubernetesConfig(parsed, cwd),
    state: stateConfig(parsed),
  };
}
