export * from './sandbox.types';
export * from './stateful/stateful.types';
export * from './sandbox-tier.port';
export * from './sandbox.errors';
export * from './sandbox.constants';
export * from './sandbox.options';
export * from './sandbox.module';
export { SandboxManager, toOutcome, type PrepareOptions } from './sandbox-manager.service';
export { BASE_ENV, ENV_LIMITS, EGRESS_PROXY_URL, buildChildEnv, egressEnv, validateEnv } from './env-policy';
export { CALL_DIR_TARGET, CALL_SOCKET_NAME, CALL_SOCKET_TARGET } from './call-channel';
export { OutputCollector, RedactingDecoder, REDACTED } from './output-collector';
export { RiskPolicy, DEFAULT_RISK_THRESHOLDS } from './risk/risk-policy';
export { DEFAULT_RISK_RULES, type RiskRule, type RulePatterns } from './risk/risk-rules';
export { BubblewrapTier } from './subprocess/bubblewrap-tier';
export {
  ProcessLauncher,
  ChildProcessLauncher,
  type LaunchSpec,
  type LaunchedProcess,
  type ProcessExit,
} from './subprocess/process-launcher';
export * from './subprocess/process-limiter';
export {
  CgroupLimiter,
  NoCgroupLimiter,
  detectProcessLimiter,
  nodeCgroupHost,
  type CgroupHost,
} from './subprocess/cgroup-limiter';
export * from './container';
export * from './pooled';
export { SessionKernels } from './stateful/session-kernels';
export {
  SessionProcesses,
  ProcessLimitError,
  PROCESS_SIGNALS,
  exitWords,
  type ProcessSignal,
} from './stateful/session-processes';
export { StatefulBoxHost, type StatefulBox } from './stateful/stateful-box.port';
export type { StatefulOptions } from './stateful/stateful.options';
export * from './kubernetes';
