import { Inject, Injectable, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import type { ActionResult } from '@switchyard/common';
import { BrowserRouter } from '@switchyard/browser';
import { ContextGraph } from '@switchyard/context-graph';
import { PooledTier, SANDBOX_TIERS, type SandboxTier } from '@switchyard/sandbox';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { EventLoopLag } from './event-loop-lag';

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/**
 * Prometheus metrics of one engine, in its own registry (several engines may share a process in tests). Gauges of
 * other components are read when scraped, so they cost nothing between scrapes.
 */
@Injectable()
export class MetricsService implements OnModuleInit, OnModuleDestroy {
  readonly registry = new Registry();
  private readonly loopLag = new EventLoopLag(this.registry);
  private readonly actions = new Counter({
    name: 'switchyard_actions_total',
    help: 'Actions by type, tier and final status',
    labelNames: ['type', 'tier', 'status'] as const,
    registers: [this.registry],
  });
  private readonly durations = new Histogram({
    name: 'switchyard_action_duration_seconds',
    help: 'Action duration by tier',
    labelNames: ['tier'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  private readonly risk = new Counter({
    name: 'switchyard_action_risk_total',
    help: 'Code actions by risk level',
    labelNames: ['level'] as const,
    registers: [this.registry],
  });
  private readonly http = new Counter({
    name: 'switchyard_http_requests_total',
    help: 'HTTP requests by method, route and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly httpDuration = new Histogram({
    name: 'switchyard_http_request_duration_seconds',
    help: 'HTTP request duration by method and route',
    labelNames: ['method', 'route'] as const,
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  constructor(@Inject(SANDBOX_TIERS) tiers: SandboxTier[], browser: BrowserRouter, graph: ContextGraph) {
    collectDefaultMetrics({ register: this.registry, prefix: 'switchyard_' });
    const pooled = tiers.find((t): t is PooledTier => t instanceof PooledTier);
    new Gauge({
      name: 'switchyard_pool_containers',
      help: 'Pooled tier containers by state (idle: warm and unclaimed; starting; claimed: held by a session)',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        if (!pooled) return;
        const s = pooled.stats();
        this.set({ state: 'idle' }, s.available);
        this.set({ state: 'starting' }, Math.max(0, s.size - s.available - s.borrowed));
        this.set({ state: 'claimed' }, s.claimed);
      },
    });
    new Gauge({
      name: 'switchyard_pool_pending_acquires',
      help: 'Claims waiting for a warm container',
      registers: [this.registry],
      collect() {
        if (pooled) this.set(pooled.stats().pending);
      },
    });
    new Gauge({
      name: 'switchyard_graph_outbox_backlog',
      help: 'Graph records committed locally but not yet forwarded to Neo4j (0 for the embedded store)',
      registers: [this.registry],
      async collect() {
        this.set((await graph.health()).backlog);
      },
    });
    new Gauge({
      name: 'switchyard_browser_contexts',
      help: 'Open browser session contexts by route (shared browser or dedicated)',
      labelNames: ['route'] as const,
      registers: [this.registry],
      collect() {
        const s = browser.stats();
        this.set({ route: 'shared' }, s.shared);
        this.set({ route: 'dedicated' }, s.dedicated);
      },
    });
  }

  onModuleInit(): void {
    this.loopLag.start();
  }

  onModuleDestroy(): void {
    this.loopLag.stop();
  }

  /** Reports the actions running or queued, read from the scheduler when scraped. */
  trackInFlight(read: () => { running: number; queued: number }): void {
    new Gauge({
      name: 'switchyard_actions_in_flight',
      help: 'Actions running or queued',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const s = read();
        this.set({ state: 'running' }, s.running);
        this.set({ state: 'queued' }, s.queued);
      },
    });
  }

  actionCompleted(r: ActionResult): void {
    this.actions.inc({ type: r.type, tier: r.tier, status: r.status });
    this.durations.observe({ tier: r.tier }, r.durationMs / 1000);
    if (r.type === 'code') this.risk.inc({ level: r.risk.level });
  }

  httpRequest(method: string, route: string, status: number, seconds: number): void {
    this.http.inc({ method, route, status: String(status) });
    this.httpDuration.observe({ method, route }, seconds);
  }

  async scrape(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
