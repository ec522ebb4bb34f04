import { DynamicModule, Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { BrowserModule } from '@switchyard/browser';
import { type ContextGraph, ContextGraphModule } from '@switchyard/context-graph';
import {
  ContainerModule,
  ContainerTier,
  DEFAULT_SANDBOX_HOST_ID,
  defaultEngineInstanceId,
  DEFAULT_SECRET_PATTERNS,
  engineSecretPatterns,
  PooledTier,
  PooledTierModule,
  RiskPolicy,
  SandboxModule,
} from '@switchyard/sandbox';
import { WorkspaceModule } from '@switchyard/workspace';
import * as path from 'node:path';
import { ActionsController } from './actions/actions.controller';
import { ActionScheduler } from './actions/action-scheduler';
import { ExecutionEngine } from './actions/execution-engine.service';
import { EventsController } from './events/events.controller';
import { SessionEvents } from './events/session-events';
import { IdempotencyService } from './idempotency/idempotency.service';
import { SecretRedactor } from './redaction/secret-redactor';
import { PlanExecutor } from './plans/plan-executor.service';
import { PlanStore } from './plans/plan.store';
import { PlansController } from './plans/plans.controller';
import { ToolCallsService } from './tools/tool-calls.service';
import { MetricsController } from './metrics/metrics.controller';
import { MetricsService } from './metrics/metrics.service';
import { ReadinessController } from './health/readiness.controller';
import { ToolsController } from './tools/tools.controller';
import { ToolsService } from './tools/tools.service';
import { CLOCK, type Clock, ENGINE_CONFIG, systemClock } from './config/config.tokens';
import type { ContainerTierConfig, EngineConfig } from './config/engine-config';
import { GraphController } from './graph/graph.controller';
import { contextGraphOptions } from './graph/graph-store';
import { HealthController } from './health/health.controller';
import { ApiKeyGuard } from './http/api-key.guard';
import { SessionStore } from './sessions/session.store';
import { SessionsController } from './sessions/sessions.controller';
import { SessionsService } from './sessions/sessions.service';
import { SqliteSessionStore } from './sessions/sqlite-session.store';

/** Composition root: wires the libraries from one validated configuration. */
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
      ...engineSecretPatterns(),
    ];
    const scriptRisk = new RiskPolicy({
      thresholds: config.sandbox.riskThresholds,
      disabledRules: config.sandbox.disabledRiskRules,
    });
    const tierLimits = (t: ContainerTierConfig) => ({
      maxTimeoutMs: t.maxTimeoutMs,
      output: { maxBytes: t.outputMaxBytes },
    });
    return {
      module: AppModule,
      imports: [
        TerminusModule.forRoot({ errorLogStyle: 'json' }),
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
          quota: config.workspace.quota,
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
            },
            tempDir: path.join(config.dataDir, 'tmp'),
            tierLimits: { pooled: tierLimits(sb.pooled), container: tierLimits(sb.container) },
          },
          {
            // One Docker client (imported by ContainerModule, from DOCKER_HOST as dockerode reads it) shared by
            // both container tiers.
            imports: [
              ContainerModule.forRoot({
                image: sb.image,
                engineInstanceId,
                limits: {
                  memoryBytes: sb.container.memoryBytes,
                  nanoCpus: sb.container.nanoCpus,
                  pids: sb.container.pids,
                },
              }),
              PooledTierModule.forRoot(
                {
                  image: sb.image,
                  engineId: engineInstanceId,
                  ...sb.pool,
                  limits: {
                    memoryBytes: sb.pooled.memoryBytes,
                    nanoCpus: sb.pooled.nanoCpus,
                    pids: sb.pooled.pids,
                  },
                },
                false,
              ),
            ],
            tiers: [ContainerTier, PooledTier],
          },
        ),
        BrowserModule.forRoot({
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
        }),
      ],
      controllers: [
        SessionsController,
        ActionsController,
        EventsController,
        PlansController,
        ToolsController,
        MetricsController,
        ReadinessController,
        GraphController,
        HealthController,
      ],
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: overrides.clock ?? systemClock },
        {
          provide: SessionStore,
          useFactory: () => new SqliteSessionStore(path.join(config.dataDir, 'engine.db')),
        },
        ApiKeyGuard,
        SessionsService,
        ExecutionEngine,
        IdempotencyService,
        { provide: SecretRedactor, useFactory: () => new SecretRedactor(secretPatterns) },
        PlanExecutor,
        ToolsService,
        MetricsService,
        ToolCallsService,
        { provide: PlanStore, useFactory: () => new PlanStore(path.join(config.dataDir, 'engine.db')) },
        { provide: ActionScheduler, useFactory: () => new ActionScheduler(config.actions) },
        { provide: SessionEvents, useFactory: () => new SessionEvents(config.actions.eventsBuffer) },
      ],
    };
  }
}
