import { Inject, Injectable, Logger } from '@nestjs/common';
import { type ActionError, CLOCK, type Clock } from '@switchyard/common';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { ENGINE_HOOKS } from './engine-hooks';
import type { HookDefinition } from './hook-file';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { PolicyFacts } from '../../state/policies/policy.types';
import { HookClient } from './hook-client';
import { type HookDelivery, HookDeliveryStore } from '../../state/hooks/hook-deliveries.store';
import { type ArmedHook, armHooks, backoffMs, type HookedAction } from './hooked-action';

/** What the before-hooks said of an action: a refusal, and what they noted on it. */
export interface BeforeVerdict {
  denial?: ActionError;
  /** Each hook's `annotations`, by hook name: kept on the action's result. */
  annotations?: Record<string, unknown>;
}

const MAX_ANNOTATION_BYTES = 16 * 1024;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Before-action hooks: each one that sees an action is asked, in file order, at the action's turn (after any approval,
 * before it queues for a slot). A hook answers `{"decision": "allow"|"deny", "reason"?, "annotations"?}`; a deny
 * refuses the action (recorded `denied`), annotations are kept on its result. A hook that cannot be reached within
 * its timeout and retries lets the action through unless it says `onFailure: "deny"`. Every attempt is recorded.
 */
@Injectable()
export class BeforeHooks {
  private readonly logger = new Logger('Hooks');
  private readonly hooks: ArmedHook[];

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: HookClient,
    private readonly deliveries: HookDeliveryStore,
    @Inject(ENGINE_HOOKS) hooks: HookDefinition[],
  ) {
    this.hooks = armHooks(hooks.filter((h) => h.phase === 'before'));
  }

  async run(action: HookedAction, facts: PolicyFacts, signal: AbortSignal): Promise<BeforeVerdict> {
    const annotations: Record<string, unknown> = {};
    for (const { hook } of this.hooks.filter((h) => h.sees(facts))) {
      if (signal.aborted) break;
      const now = this.clock.now().toISOString();
      const delivery: HookDelivery = {
        id: `hkd_${randomBytes(12).toString('hex')}`,
        hook: hook.name,
        phase: 'before',
        actionId: action.id,
        sessionId: action.sessionId,
        tenant: action.tenant,
        status: 'pending',
        attempts: 0,
        createdAt: now,
        updatedAt: now,
      };
      await this.deliveries.insert(delivery);
      const body = JSON.stringify({
        event: 'action.before',
        deliveryId: delivery.id,
        hook: hook.name,
        action,
      });
      let answer: Record<string, unknown> | undefined;
      while (delivery.attempts <= hook.retries && !signal.aborted) {
        if (delivery.attempts > 0)
          await sleep(backoffMs(delivery.attempts, 100, 2000), undefined, { signal }).catch(() => undefined);
        delivery.attempts++;
        try {
          const reply = await this.client.post(hook, 'action.before', delivery.id, body);
          delivery.lastStatus = reply.status;
          if (reply.status >= 200 && reply.status < 300) {
            answer = parseAnswer(reply.body);
            if (answer) break;
            delivery.lastError = 'the answer is not a JSON object {"decision": "allow"|"deny", ...}';
          } else {
            delivery.lastError = `HTTP ${reply.status}`;
          }
        } catch (err) {
          delivery.lastError = (err as Error).message;
        }
      }
      delivery.updatedAt = this.clock.now().toISOString();
      if (!answer) {
        delivery.status = 'failed';
        await this.deliveries.update(delivery);
        this.logger.warn({
          msg: 'before-hook failed',
          hook: hook.name,
          actionId: action.id,
          error: delivery.lastError,
        });
        if (hook.onFailure === 'deny') {
          return {
            denial: {
              class: 'policy',
              code: 'HOOK_FAILED',
              message:
                `before-hook ${hook.name} could not be reached (${delivery.lastError}) and refuses actions when it ` +
                'cannot answer (onFailure: deny in SWITCHYARD_HOOKS_FILE)',
            },
            ...(Object.keys(annotations).length > 0 && { annotations }),
          };
        }
        continue;
      }
      delivery.status = 'delivered';
      delivery.decision = answer.decision === 'deny' ? 'deny' : 'allow';
      delete delivery.lastError;
      await this.deliveries.update(delivery);
      if (
        isRecord(answer.annotations) &&
        Buffer.byteLength(JSON.stringify(answer.annotations)) <= MAX_ANNOTATION_BYTES
      ) {
        annotations[hook.name] = answer.annotations;
      }
      if (delivery.decision === 'deny') {
        const reason = typeof answer.reason === 'string' ? answer.reason.slice(0, 1000) : 'no reason given';
        return {
          denial: {
            class: 'policy',
            code: 'HOOK_DENIED',
            message: `denied by before-hook ${hook.name}: ${reason}`,
          },
          ...(Object.keys(annotations).length > 0 && { annotations }),
        };
      }
    }
    return Object.keys(annotations).length > 0 ? { annotations } : {};
  }
}

/** The hook's answer, when it is a JSON object whose decision (if any) is allow or deny. */
function parseAnswer(text: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(text);
    if (!isRecord(value)) return undefined;
    if (value.decision !== undefined && value.decision !== 'allow' && value.decision !== 'deny')
      return undefined;
    return value;
  } catch {
    return undefined;
  }
}
