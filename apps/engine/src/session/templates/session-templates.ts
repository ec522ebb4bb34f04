import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { type ActionError, type Tier, TIERS } from '@switchyard/common';
import type { SessionImage } from '@switchyard/sandbox';
import type { Session } from '../../state/sessions/session.model';
import { TemplateRegistry } from './template-registry';

/** The Kubernetes backend's floor: every session's code runs in its pod. */
const POD_FLOOR: Tier = 'pooled';

/** What a session's template means for one of its actions, decided when the action is prepared. */
export interface TemplateRouting {
  /** The session's template, if it has one. */
  template?: string;
  /** The action's floor: the caller's (a retry's), raised to `pooled` on the Kubernetes backend. */
  minTier?: Tier;
  /** Why the floor is the backend's, for the answer when a weaker tier was asked for. */
  floorReason?: string;
  /** The image every tier runs the session's code in (the subprocess tier on its exported root), with its environment. */
  image?: SessionImage;
  /** The template cannot be resolved now (file gone or broken, no default image to build on): refused. */
  denial?: ActionError;
}

const rank = (tier: Tier): number => TIERS.indexOf(tier);

/**
 * Resolves sessions' templates for the code and process handlers: the template's image and environment, which every
 * tier runs (the subprocess tier on the image's exported root), and the refusal of an action whose image is not
 * built. A template session's code never runs in the default image instead.
 */
@Injectable()
export class SessionTemplates {
  constructor(
    private readonly registry: TemplateRegistry,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {}

  routing(session: Session, minTier?: Tier): TemplateRouting {
    const floor = this.backendFloor(minTier);
    const name = session.template;
    if (name === undefined) return floor;
    const routing = { ...floor, template: name };
    const entry = this.registry.entry(name);
    if (!entry) {
      return { ...routing, denial: notReady(name, `its file is gone from ${this.registry.dir}`) };
    }
    const { image, reason } = this.registry.expectedImage(entry);
    if (image === undefined) {
      return { ...routing, denial: notReady(name, reason!, this.registry.buildCommand(entry)) };
    }
    return { ...routing, image: { ref: image, env: { ...entry.definition!.env } } };
  }

  /** The caller's floor, raised to `pooled` on the Kubernetes backend. */
  private backendFloor(minTier: Tier | undefined): TemplateRouting {
    if (this.config.kubernetes.backend !== 'kubernetes') return { ...(minTier !== undefined && { minTier }) };
    if (minTier !== undefined && rank(minTier) >= rank(POD_FLOOR)) return { minTier };
    return { minTier: POD_FLOOR, floorReason: POD_FLOOR_REASON };
  }

  /**
   * The refusal of an action whose template image Docker does not have (`TEMPLATE_NOT_READY`, naming the build
   * command), or `undefined`. When Docker does not answer the tier's own availability check refuses the action.
   */
  async notReady(routing: TemplateRouting): Promise<ActionError | undefined> {
    if (routing.denial) return routing.denial;
    if (routing.template === undefined || routing.image === undefined) return undefined;
    let exists: boolean;
    try {
      exists = await this.registry.imageExists(routing.image.ref);
    } catch {
      return undefined;
    }
    if (exists) return undefined;
    const entry = this.registry.entry(routing.template);
    const view = entry ? await this.registry.view(entry) : undefined;
    const why =
      view?.state === 'stale'
        ? `its file or base image changed since the last build (${view.builtImage}); ${routing.image.ref} is not built`
        : `its image ${routing.image.ref} is not in the Docker engine`;
    return notReady(routing.template, why, entry && this.registry.buildCommand(entry));
  }
}

/** The Kubernetes backend's floor: the session's files are in its pod, so its code runs there too (never weaker). */
const POD_FLOOR_REASON =
  "the Kubernetes backend keeps the session's workspace in its own pod, so its low-risk code runs there too (a " +
  'container with every sandbox setting) instead of a bubblewrap sandbox on the engine host';

function notReady(name: string, why: string, build?: string): ActionError {
  return {
    class: 'policy',
    code: 'TEMPLATE_NOT_READY',
    message:
      `the session's template "${name}" is not ready: ${why}` +
      (build ? `; build it with \`${build}\`` : '') +
      ' (GET /v1/templates shows its state). Its code never runs in the default image instead',
  };
}
