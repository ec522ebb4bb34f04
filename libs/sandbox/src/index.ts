export * from './core/sandbox.types';
export * from './core/stateful/stateful.types';
export * from './core/sandbox-tier.port';
export * from './core/system-root.port';
export * from './core/sandbox.errors';
export * from './core/sandbox.constants';
export * from './core/sandbox.options';
export { CONTAINER_LIMIT_BOUNDS, POOL_BOUNDS } from './core/container-bounds';
export * from './core/pooled.errors';
export { defaultEngineInstanceId } from './core/engine-instance';
export {
  RUNNER_PROTOCOL,
  type ListeningPort,
  type TermExitEvent,
  type TermOpenRequest,
  type TermOutputEvent,
} from './core/runner/runner-protocol';
export { RunnerRefusedError } from './core/runner/runner.errors';
export { RunnerTunnel, TunnelError } from './core/runner/runner-tunnel';
export * from './sandbox.module';
export { SandboxManager, toOutcome, type PrepareOptions } from './sandbox-manager.service';
export {
  BASE_ENV,
  ENV_LIMITS,
  EGRESS_PROXY_URL,
  buildChildEnv,
  egressEnv,
  trustedCaEnv,
  type TrustedCaFiles,
  validateEnv,
} from './core/env-policy';
export { CALL_DIR_TARGET, CALL_SOCKET_NAME, CALL_SOCKET_TARGET } from './core/call-channel';
export { asCallOf, callingAction } from './core/call-scope';
export { OutputCollector, RedactingDecoder, REDACTED } from './core/output-collector';
export { RiskPolicy, DEFAULT_RISK_THRESHOLDS } from './risk/risk-policy';
export { DEFAULT_RISK_RULES, type RiskRule, type RulePatterns } from './risk/risk-rules';
export { BubblewrapTier } from './backends/subprocess/bubblewrap-tier';
export {
  ProcessLauncher,
  type LaunchSpec,
  type LaunchedProcess,
  type ProcessExit,
} from './backends/subprocess/process-launcher';
export { ChildProcessLauncher } from './backends/subprocess/child-process-launcher';
export { SpawnerProcessLauncher } from './backends/subprocess/spawner-launcher';
export * from './backends/subprocess/process-limiter';
export {
  CgroupLimiter,
  NoCgroupLimiter,
  detectProcessLimiter,
  nodeCgroupHost,
  type CgroupHost,
} from './backends/subprocess/cgroup-limiter';
export * from './backends/docker';
export * from './backends/docker/pooled';
export { SessionKernels } from './core/stateful/session-kernels';
export {
  SessionProcesses,
  ProcessLimitError,
  PROCESS_SIGNALS,
  exitWords,
  type ProcessSignal,
} from './core/stateful/session-processes';
export { StatefulBoxHost, type StatefulBox } from './core/stateful/stateful-box.port';
export {
  SessionTerminals,
  TerminalClosedError,
  TerminalLimitError,
  TERMINAL_ID,
  newTerminalId,
  endWords as terminalEndWords,
  type TerminalAttachment,
  type TerminalClient,
  type TerminalListener,
} from './core/stateful/session-terminals';
export {
  SessionPorts,
  PortClosedError,
  PortsDisabledError,
  type SessionPortConnection,
  type SessionListeningPort,
} from './core/stateful/session-ports';
export {
  DEFAULT_PORT_RANGES,
  formatPortRanges,
  parsePortRanges,
  portAllowed,
  type PortRange,
  type PortsOptions,
  type ResolvedPortsOptions,
} from './core/stateful/ports.options';
export { STATEFUL_BOUNDS, type StatefulOptions } from './core/stateful/stateful.options';
export * from './backends/kubernetes';
