import { DynamicModule, Module } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { BrowserModule } from '@switchyard/browser';
import { type ContextGraph, ContextGraphModule } from '@switchyard/context-graph';
import {
  DEFAULT_SANDBOX_HOST_ID,
  defaultEngineInstanceId,
  DEFAULT_SECRET_PATTERNS,
  RiskPolicy,
  SandboxModule,
  secretValuePatterns,
} from '@switchyard/sandbox';
import { WorkspaceModule } from '@switchyard/workspace';
import * as path from 'node:path';
import { ConfigModule } from './platform/config/config.module';
import type { ContainerTierConfig, EngineConfig } from './platform/config/engine-config';
import { contextGraphOptions } from './engine/graph/graph-store';
import { HealthModule } from './edge/health/health.module';
import { AuthModule } from './edge/http/auth.module';
import { UpgradesModule } from './edge/http/upgrades.module';
import { McpModule } from './edge/mcp/mcp.module';
import { RedactionModule } from './platform/redaction/redaction.module';
import { ReplicaForwardingModule } from './edge/replicas/replica-forwarding.module';
import { StorageModule } from './state/storage/storage.module';
import { WorkspacesModule } from './session/workspaces/workspaces.module';
import { containerTiers } from './sandbox-backend';
import { browserSessionPorts } from './browser-session-ports';
import { sandboxCaFiles, sandboxCaWrite } from './platform/sandbox-ca/sandbox-ca';
import { TemplatesApiModule } from './edge/templates/templates-api.module';
import { SessionsApiModule } from './edge/sessions/sessions-api.module';
import { EventsApiModule } from './edge/events/events-api.module';
import { CheckpointsApiModule } from './edge/checkpoints/checkpoints-api.module';
import { ActionsApiModule } from './edge/actions/actions-api.module';
import { BrowserApiModule } from './edge/browser/browser-api.module';
import { FilesApiModule } from './edge/files/files-api.module';
import { ApprovalsApiModule } from './edge/approvals/approvals-api.module';
import { HooksApiModule } from './edge/hooks/hooks-api.module';
import { PlansApiModule } from './edge/plans/plans-api.module';
import { KernelsApiModule } from './edge/kernels/kernels-api.module';
import { JupyterApiModule } from './edge/jupyter/jupyter-api.module';
import { ToolsApiModule } from './edge/tools/tools-api.module';
import { PolicyApiModule } from './edge/policies/policies-api.module';
import { SkillsApiModule } from './edge/skills/skills-api.module';
import { GraphApiModule } from './edge/graph/graph-api.module';
import { MetricsApiModule } from './edge/metrics/metrics-api.module';
import { TerminalsApiModule } from './edge/terminals/terminals-api.module';
import { PortsApiModule } from './edge/ports/ports-api.module';

/**
 * Composition root: the libraries wired from one validated configuration, and the engine's feature modules (sessions,
 * actions, plans, events, tools, graph queries, health, metrics).
 */
@Module({})
export class AppModule {
  static forRoot(
    config: EngineConfig,
    overrides: { clock?: Clock; graph?: ContextGraph } = {},
  ): DynamicModule {
    const sb = config.sandbox;
    // One id labels every container of this engine process, so a later engine can tell its leftovers apart.
    const engineInstanceId = defaultEngineInstanceId();
    // One list of secret patterns for the tiers (code output, as it streams) and the engine (everything else).
    const secretPatterns = [
      ...DEFAULT_SECRET_PATTERNS,
      ...config.redaction.patterns,
      ...config.redaction.values,
      ...secretValuePatterns(config.redaction.engineSecrets),
    ];
    const scriptRisk = new RiskPolicy({
      thresholds: config.sandbox.riskThresholds,
      disabledRules: config.sandbox.disabledRiskRules,
    });
    // The operator's extra CAs: written at boot (`sandboxCaWrite`), seen by every tier at these paths.
    const trustedCa = sandboxCaFiles(config.dataDir, config.network.sandboxCaFile);
    const tierLimits = (t: ContainerTierConfig) => ({
      maxTimeoutMs: t.maxTimeoutMs,
      output: { maxBytes: t.outputMaxBytes },
    });
    return {
      module: AppModule,
      providers: [sandboxCaWrite],
      imports: [
        ConfigModule.forRoot(config, overrides.clock, engineInstanceId),
        StorageModule.forRoot(config),
        WorkspacesModule.forRoot(config.kubernetes.backend),
        AuthModule,
        UpgradesModule,
        RedactionModule.forRoot(secretPatterns),
        ContextGraphModule.forRoot(contextGraphOptions(config, overrides.graph)),
        WorkspaceModule.forRoot({
          root: path.join(config.dataDir, 'workspaces'),
          limits: {
            maxFileBytes: config.workspace.maxFileBytes,
            maxWorkspaceBytes: config.workspace.maxWorkspaceBytes,
            maxPathLength: 4096,
          },
          // Workspaces belong to the uid sandboxed code runs as (applied only when the engine is root).
          sandboxUid: DEFAULT_SANDBOX_HOST_ID,
          sandboxGid: DEFAULT_SANDBOX_HOST_ID,
          // On Kubernetes each workspace is its session pod's volume; the engine keeps only plain staging directories.
          quota: config.kubernetes.backend === 'kubernetes' ? 'off' : config.workspace.quota,
          imagePool: config.kubernetes.backend === 'kubernetes' ? 0 : config.workspace.imagePool,
          filesystem: config.workspace.filesystem,
          checkpoints: config.workspace.checkpoints,
        }),
        SandboxModule.forRoot(
          {
            defaultTimeoutMs: config.sandbox.defaultTimeoutMs,
            maxTimeoutMs: config.sandbox.maxTimeoutMs,
            maxCodeBytes: config.sandbox.maxCodeBytes,
            output: { ...config.sandbox.output, redact: secretPatterns, redactEngineSecrets: false },
            allowWeakerTier: config.sandbox.allowWeakerTier,
            risk: {
              thresholds: config.sandbox.riskThresholds,
              disabledRules: config.sandbox.disabledRiskRules,
            },
            subprocess: {
              memoryBytes: config.sandbox.subprocess.memoryBytes,
              pids: config.sandbox.subprocess.pids,
              cpus: config.sandbox.subprocess.cpus,
              sessionCpus: config.sandbox.subprocess.sessionCpus,
            },
            tempDir: path.join(config.dataDir, 'tmp'),
            ...(trustedCa && { trustedCa }),
            stateful: {
              ...sb.stateful,
              settingNames: {
                maxProcessesPerSession: 'SWITCHYARD_MAX_PROCESSES',
                maxTerminalsPerSession: 'SWITCHYARD_MAX_TERMINALS_PER_SESSION',
              },
            },
            tierLimits: { pooled: tierLimits(sb.pooled), container: tierLimits(sb.container) },
            ports: {
              enabled: config.ports.enabled,
              allowed: config.ports.allowed,
              settingNames: { enabled: 'SWITCHYARD_PORTS_ENABLED', allowed: 'SWITCHYARD_PORTS_ALLOWED' },
            },
          },
          containerTiers(config, engineInstanceId, trustedCa ? [trustedCa.bundle, trustedCa.extra] : []),
        ),
        BrowserModule.forRoot(
          {
            enabled: config.browser.enabled,
            executablePath: config.browser.executablePath,
            // Engine-private (profiles, downloads before they are copied in): never under `workspaces/`.
            stateDir: path.join(config.dataDir, 'browser'),
            allowlist: config.browser.allowlist,
            allowlistSetting: 'SWITCHYARD_BROWSER_ALLOWLIST',
            evaluate: config.browser.evaluate,
            evaluateSetting: 'SWITCHYARD_BROWSER_EVALUATE',
            // Page JavaScript is scored by the same rules and thresholds as node code.
            assessScript: (script: string) => scriptRisk.assess('node', script),
            defaultTimeoutMs: config.browser.timeoutMs,
            maxTimeoutMs: config.sandbox.maxTimeoutMs,
            maxContexts: config.browser.maxContexts,
            maxDedicated: config.browser.maxDedicated,
            idleMs: config.browser.idleMs,
            maxArtifactBytes: config.browser.maxArtifactBytes,
            outputMaxBytes: config.sandbox.output.maxBytes,
            prelaunch: config.browser.prelaunch,
          },
          [browserSessionPorts],
        ),
        TemplatesApiModule,
        SessionsApiModule,
        EventsApiModule,
        CheckpointsApiModule,
        ActionsApiModule,
        FilesApiModule,
        BrowserApiModule,
        PlansApiModule,
        KernelsApiModule,
        TerminalsApiModule,
        PortsApiModule,
        JupyterApiModule,
        ToolsApiModule,
        McpModule,
        PolicyApiModule,
        SkillsApiModule,
        GraphApiModule,
        HealthModule,
        MetricsApiModule,
        ApprovalsApiModule,
        HooksApiModule,
        ReplicaForwardingModule.forRoot(config),
      ],
    };
  }
}
