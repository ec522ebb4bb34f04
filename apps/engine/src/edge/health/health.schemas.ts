import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { FREE_OBJECT, object } from '../http/common.schemas';

/**
 * Response schemas of the probes: `/health` (`HealthResponse`), `/health/live`, and `/health/ready` (terminus'
 * report). With SWITCHYARD_API_KEYS set, a caller without a valid key gets `status` alone.
 */

const TIER_AVAILABILITY: SchemaObject = object(['available'], {
  available: { type: 'boolean' },
  reason: { type: 'string', description: 'Why not, in words an operator can act on' },
  code: {
    type: 'string',
    description: 'Why not, for code: `DOCKER_UNAVAILABLE`, `SANDBOX_IMAGE_MISSING`, …',
  },
  details: FREE_OBJECT('What the tier found when probing (limits in force, interpreters, …)'),
});

const BROWSER_AVAILABILITY: SchemaObject = object(['available'], {
  available: { type: 'boolean' },
  reason: { type: 'string' },
  shared: { type: 'string', enum: ['running', 'stopped'], description: 'The shared browser' },
  contexts: { type: 'integer', description: 'Sessions with a browser context' },
  dedicated: { type: 'integer', description: 'Dedicated browsers running' },
  maxContexts: { type: 'integer' },
});

const HEALTH_SCHEMA: SchemaObject = object(
  ['status'],
  {
    status: { type: 'string', enum: ['ok'] },
    auth: {
      type: 'string',
      enum: ['api-keys', 'open'],
      description: '`open`: no SWITCHYARD_API_KEYS, every request is served',
    },
    backend: object(
      ['name', 'ready'],
      {
        name: { type: 'string', enum: ['docker', 'kubernetes'], description: 'SWITCHYARD_SANDBOX_BACKEND' },
        namespace: { type: 'string', description: 'Kubernetes: the namespace of the sandbox pods' },
        kubeconfig: { type: 'string', description: 'Kubernetes: the kubeconfig in use (absent: in-cluster)' },
        context: {
          type: 'string',
          description: 'Kubernetes: the kubeconfig context (SWITCHYARD_K8S_CONTEXT)',
        },
        ready: {
          type: 'boolean',
          description:
            'Docker: the daemon answers and has the sandbox image. Kubernetes: the API server answers and takes ' +
            "the engine's credentials, the account has the rights the backend uses, the namespace, a Ready node and " +
            'the image are there, and the latest pod of the sandbox image started (or failed more than a minute ago)',
        },
        reason: { type: 'string', description: 'Why the backend is not ready, naming the setting to change' },
        code: {
          type: 'string',
          description:
            'Kubernetes: why not, for code (`KUBERNETES_UNAVAILABLE`, `KUBERNETES_FORBIDDEN`, ' +
            '`KUBERNETES_NAMESPACE_MISSING`, `KUBERNETES_NO_READY_NODE`, `SANDBOX_IMAGE_MISSING`, `POD_START_TIMEOUT`, ' +
            '`POD_REJECTED`)',
        },
      },
      'Where the container tiers run',
    ),
    tiers: {
      type: 'object',
      description:
        'Each execution tier (subprocess, pooled, container) and the browser, with why one is not available',
      properties: { browser: BROWSER_AVAILABILITY },
      additionalProperties: TIER_AVAILABILITY,
    },
    graph: object(
      ['store', 'status', 'backlog'],
      {
        store: { type: 'string', enum: ['embedded', 'neo4j'] },
        status: {
          type: 'string',
          enum: ['ok', 'degraded'],
          description: '`degraded`: Neo4j cannot be reached; records wait in the local outbox',
        },
        backlog: { type: 'integer', description: 'Records committed locally but not yet in Neo4j' },
        error: { type: 'string', description: 'The last error talking to Neo4j, while degraded' },
      },
      'The context graph store',
    ),
    state: object(
      ['store'],
      {
        store: { type: 'string', enum: ['sqlite', 'postgres'], description: 'SWITCHYARD_STATE' },
        replica: { type: 'string', description: 'Replicas: this replica’s id (its pods’ engine label)' },
        replicas: { type: 'integer', description: 'Replicas: how many hold a lease now, this one included' },
      },
      "Where the engine's shared state is kept",
    ),
  },
  'Alive; with a valid key (or none configured), the tiers this engine can use and its graph store',
);

const LIVENESS_SCHEMA: SchemaObject = object(['status'], { status: { type: 'string', enum: ['ok'] } });

const INDICATORS: SchemaObject = {
  type: 'object',
  additionalProperties: {
    ...object(['status'], { status: { type: 'string', enum: ['up', 'down'] } }),
    additionalProperties: true,
  },
  description:
    'By dependency (engine, graph, bubblewrap, docker and container_runtime — or kubernetes with that backend —, ' +
    'sandbox_image, chromium): `status`, and what the check found (`reason` when down; kubernetes: its `code`)',
};

const READINESS_SCHEMA: SchemaObject = object(
  ['status'],
  {
    status: { type: 'string', enum: ['ok'] },
    info: { ...INDICATORS, description: 'The dependencies that are up' },
    error: { ...INDICATORS, description: 'The dependencies that are down (none when ready)' },
    details: INDICATORS,
  },
  "Ready: every dependency is up. With a valid key (or none configured), terminus' report of each",
);

export const HEALTH_SCHEMAS = {
  Health: HEALTH_SCHEMA,
  Liveness: LIVENESS_SCHEMA,
  Readiness: READINESS_SCHEMA,
} satisfies Record<string, SchemaObject>;
