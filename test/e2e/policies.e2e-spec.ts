import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Driver } from 'neo4j-driver';
import { holdTestNeo4j, neo4jTestServer } from '../../libs/context-graph/src/testing';
import { EngineHarness } from '../support/engine-harness';
import { compareStores, neo4jEnv, waitForGraph, withEngineStores } from '../support/neo4j-graph';
import { SseClient } from '../support/sse-client';

/**
 * Policies and approvals through the REST API, on both graph stores: layered allow/deny/ask rules (engine file,
 * tenant set by an admin key, session, plan), the filtered tool list, blocked calls recorded `denied` naming the rule
 * and layer, and approvals approved, rejected and expired through REST, in a plan and through tool calls, with the
 * decisions in the graph.
 */
const TENANT_KEY = 'tenant-key-0123456789abcdef';
const OTHER_KEY = 'other-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef';

const server = neo4jTestServer();

function policySuite(extraEnv: () => Record<string, string>, neo4j?: () => Driver): void {
  let engine: EngineHarness;
  let dir: string;
  let tenant: string;

  const as = (key: string) => engine.as(key);

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-policy-'));
    const policyFile = path.join(dir, 'policy.json');
    writeFileSync(
      policyFile,
      JSON.stringify({
        rules: [
          { effect: 'deny', match: { tool: 'browser_evaluate' }, reason: 'no page scripts on this engine' },
        ],
      }),
    );
    engine = await EngineHarness.start({
      ...extraEnv(),
      SWITCHYARD_API_KEYS: `${TENANT_KEY},${OTHER_KEY}`,
      SWITCHYARD_ADMIN_KEYS: ADMIN_KEY,
      SWITCHYARD_POLICY_FILE: policyFile,
      SWITCHYARD_APPROVAL_TIMEOUT_MS: '60000',
      // Page scripts are off by default (a refusal of the browser tier's own); on here, the engine policy refuses them.
      SWITCHYARD_BROWSER_EVALUATE: 'true',
    });
    tenant = (await as(TENANT_KEY).request('GET', '/v1/whoami')).body.tenant;
  });
  afterAll(async () => {
    await engine?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An action's record once it has ended (polling). */
  const ended = async (sid: string, id: string): Promise<any> => {
    for (let i = 0; i < 300; i++) {
      const r = await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`);
      if (!['running', 'awaiting_approval'].includes(r.body.status)) return r.body;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`action ${id} never ended`);
  };

  it('tells who calls: tenant, admin, approver', async () => {
    const me = await as(TENANT_KEY).request('GET', '/v1/whoami');
    expect(me.body).toEqual({
      tenant: expect.stringMatching(/^t_[0-9a-f]{16}$/),
      admin: false,
      id: `tenant:${tenant}`,
      approver: false,
    });
    const admin = await as(ADMIN_KEY).request('GET', '/v1/whoami');
    expect(admin.body).toMatchObject({ admin: true, approver: true });
  });

  it('layers engine, tenant and session rules: deny wins, a lower layer only narrows, blocked calls are recorded', async () => {
    // Only an admin sets a tenant's layer.
    const rules = { rules: [{ effect: 'deny', match: { tool: 'file_delete' } }] };
    expect((await as(TENANT_KEY).request('PUT', `/v1/tenants/${tenant}/policy`, rules)).status).toBe(403);
    const put = await as(ADMIN_KEY).request('PUT', `/v1/tenants/${tenant}/policy`, rules);
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({
      tenant,
      rules: rules.rules,
      updatedBy: expect.stringMatching(/^admin:/),
    });
    expect((await as(TENANT_KEY).request('GET', `/v1/tenants/${tenant}/policy`)).body.rules).toEqual(
      rules.rules,
    );
    const other = (await as(OTHER_KEY).request('GET', '/v1/whoami')).body.tenant;
    expect((await as(TENANT_KEY).request('GET', `/v1/tenants/${other}/policy`)).status).toBe(403);

    const sid = await as(TENANT_KEY).createSession({
      // The allow for file_delete cannot widen the tenant's deny.
      policy: {
        rules: [
          { effect: 'deny', match: { tool: 'browser_*' } },
          { effect: 'allow', match: { tool: 'file_delete' } },
          { effect: 'allow', match: { type: ['code', 'file'] } },
        ],
      },
    });

    const policy = await engine.request('GET', `/v1/sessions/${sid}/policy`);
    expect(policy.status).toBe(200);
    expect(policy.body.layers.map((l: any) => [l.layer, l.rules.length])).toEqual([
      ['engine', 1],
      ['tenant', 1],
      ['session', 3],
    ]);
    expect(policy.body.layers[0].source).toContain('SWITCHYARD_POLICY_FILE');
    expect(policy.body.layers[1].source).toContain(`PUT /v1/tenants/${tenant}/policy`);
    expect(policy.body.tools.hidden).toEqual(
      expect.arrayContaining([
        { tool: 'browser_navigate', layer: 'session', rule: expect.objectContaining({ index: 0 }) },
        { tool: 'process_start', layer: 'session' },
      ]),
    );

    // The tool list shows only what the caller's policy offers: the session's, or the tenant's without one.
    const names = async (query: string): Promise<string[]> =>
      (await engine.request('GET', `/v1/tools${query}`)).body.tools.map((t: any) => t.name);
    const sessionTools = await names(`?sessionId=${sid}`);
    expect(sessionTools).toEqual(expect.arrayContaining(['python', 'bash', 'read', 'write']));
    expect(sessionTools.filter((n) => n.startsWith('browser_') || n.startsWith('process_'))).toEqual([]);
    const tenantTools = await names('');
    expect(tenantTools).toContain('browser_navigate');
    expect(tenantTools).not.toContain('browser_evaluate');
    expect((await engine.request('GET', '/v1/tools?sessionId=ses_nope')).status).toBe(404);

    // A blocked call is a recorded denied action naming the rule and the layer, and how to ask for it.
    const nav = await engine.action(sid, { type: 'browser', op: 'navigate', url: 'https://example.com/' });
    expect(nav).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'POLICY_DENIED' } });
    expect(nav.error.message).toContain('browser_navigate is blocked by the session policy');
    expect(nav.error.message).toContain('"tool":"browser_*"');
    const del = await engine.action(sid, { type: 'file', op: 'delete', path: 'x' });
    expect(del.error.message).toContain('file_delete is blocked by the tenant policy');
    expect(del.error.message).toContain('ask an admin');
    const recorded = await engine.request('GET', `/v1/sessions/${sid}/actions/${del.id}`);
    expect(recorded.body).toMatchObject({ status: 'denied', error: { code: 'POLICY_DENIED' } });
    // Not in the session's allow rules (process), and the engine's own deny (browser_evaluate, any session).
    const proc = await engine.action(sid, { type: 'process', op: 'list' });
    expect(proc.error.message).toContain('none of its allow rules matches it');
    const free = await engine.createSession();
    const evaluate = await engine.action(free, { type: 'browser', op: 'evaluate', script: '1' });
    expect(evaluate.error.message).toContain('blocked by the engine policy');
    expect(evaluate.error.message).toContain('no page scripts on this engine');

    // What is allowed runs.
    const ok = await engine.action(sid, { type: 'code', language: 'python', code: 'print(6*7)' });
    expect(ok).toMatchObject({ status: 'succeeded', stdout: '42\n' });

    // Through a tool call, the refusal is an error result a model reads, and still a recorded action.
    const call = await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, {
      id: 't1',
      name: 'browser_navigate',
      input: { url: 'https://example.com/' },
    });
    expect(call.body).toMatchObject({ is_error: true });
    expect(call.body.content).toContain('blocked by the session policy');

    await as(ADMIN_KEY).request('DELETE', `/v1/tenants/${tenant}/policy`);
    as(TENANT_KEY);
  });

  it('refuses a policy that cannot be applied, naming the field', async () => {
    as(TENANT_KEY);
    const bad = async (policy: unknown) => (await engine.request('POST', '/v1/sessions', { policy })).body;
    expect((await bad({ rules: [{ effect: 'maybe' }] })).error.fields[0].path).toBe('policy.rules[0].effect');
    expect(
      (await bad({ rules: [{ effect: 'deny', match: { tool: '/(a)\\1/' } }] })).error.fields[0].path,
    ).toBe('policy.rules[0].match.tool');
    expect((await bad({ rules: [{ effect: 'deny', match: { colour: 'red' } }] })).error.fields[0].path).toBe(
      'policy.rules[0].match.colour',
    );
    const put = await as(ADMIN_KEY).request('PUT', `/v1/tenants/${tenant}/policy`, {
      rules: [{ effect: 'ask', match: { risk: 3 } }],
    });
    expect(put.status).toBe(400);
    expect(put.body.error.fields[0].path).toBe('body.rules[0].match.risk');
    as(TENANT_KEY);
  });

  it('holds an action a rule asks about until an approver decides: approve, reject, and who may', async () => {
    as(TENANT_KEY);
    const sid = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { tool: 'python' } }] },
    });
    const events = await SseClient.open(`${engine.baseUrl}/v1/sessions/${sid}/events`, {
      authorization: `Bearer ${TENANT_KEY}`,
    });
    try {
      const submitted = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'python',
        code: 'print("approved and ran")',
      });
      expect(submitted.status).toBe(202);
      expect(submitted.body).toMatchObject({
        status: 'awaiting_approval',
        approval: {
          layer: 'session',
          rule: expect.stringContaining('"effect":"ask"'),
          expiresAt: expect.any(String),
        },
      });
      const id = submitted.body.id;
      expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`)).body.status).toBe(
        'awaiting_approval',
      );
      await events.waitFor((e) => e.event === 'action.awaiting_approval' && e.data.actionId === id);

      // The tenant sees its pending action but may not decide it (SWITCHYARD_APPROVERS defaults to admin here).
      const mine = await engine.request('GET', '/v1/approvals');
      expect(mine.body.approvals.map((a: any) => a.actionId)).toContain(id);
      const refused = await engine.request('POST', `/v1/sessions/${sid}/actions/${id}/approve`, {});
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('NOT_AN_APPROVER');
      // Another tenant sees nothing of it.
      expect((await as(OTHER_KEY).request('GET', '/v1/approvals')).body.approvals).toEqual([]);
      expect((await as(OTHER_KEY).request('POST', `/v1/sessions/${sid}/actions/${id}/approve`)).status).toBe(
        404,
      );

      const approved = await as(ADMIN_KEY).request('POST', `/v1/sessions/${sid}/actions/${id}/approve`, {
        reason: 'looks fine',
      });
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({
        actionId: id,
        decision: 'approved',
        decidedBy: expect.stringMatching(/^admin:/),
      });
      as(TENANT_KEY);
      const done = await ended(sid, id);
      expect(done).toMatchObject({
        status: 'succeeded',
        approval: { decision: 'approved', reason: 'looks fine', decidedBy: approved.body.decidedBy },
      });
      await events.waitFor((e) => e.event === 'action.approval' && e.data.decision === 'approved');
      expect((await as(ADMIN_KEY).request('POST', `/v1/sessions/${sid}/actions/${id}/approve`)).status).toBe(
        409,
      );
      expect(
        (await as(ADMIN_KEY).request('POST', `/v1/sessions/${sid}/actions/act_nope/approve`)).status,
      ).toBe(404);

      // Rejected: denied, naming who and why; the graph keeps the decision.
      as(TENANT_KEY);
      const second = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'python',
        code: 'open("should-not-exist", "w")',
      });
      await as(ADMIN_KEY).request('POST', `/v1/sessions/${sid}/actions/${second.body.id}/reject`, {
        reason: 'no writes today',
      });
      as(TENANT_KEY);
      const rejected = await ended(sid, second.body.id);
      expect(rejected).toMatchObject({ status: 'denied', error: { code: 'APPROVAL_REJECTED' } });
      expect(rejected.error.message).toContain('no writes today');
      const context = await engine.request('GET', `/v1/sessions/${sid}/actions/${second.body.id}/context`);
      expect(context.body.approval).toMatchObject({
        decision: 'rejected',
        reason: 'no writes today',
        layer: 'session',
      });
      const graph = await engine.request('GET', `/v1/sessions/${sid}/graph`);
      const approvals = graph.body.nodes.filter((n: any) => n.label === 'Approval');
      expect(approvals.map((n: any) => n.properties.decision)).toEqual(['approved', 'rejected']);
      expect(graph.body.edges.filter((e: any) => e.type === 'HAS_APPROVAL')).toHaveLength(2);
      const list = await engine.request('GET', `/v1/sessions/${sid}/actions`);
      expect(list.body.actions.map((a: any) => a.status)).toEqual(['succeeded', 'denied']);
    } finally {
      events.close();
    }
  });

  it('a tool call held for approval answers pending at once; a plan waits on its step', async () => {
    as(TENANT_KEY);
    const sid = await engine.createSession();
    const plan = await engine.request('POST', `/v1/sessions/${sid}/plans`, {
      wait: false,
      policy: { rules: [{ effect: 'ask', match: { tool: 'bash' } }] },
      steps: [
        { id: 'write', action: { type: 'file', op: 'write', path: 'in.txt', content: 'x' } },
        {
          id: 'count',
          dependsOn: ['write'],
          action: { type: 'code', language: 'bash', code: 'wc -c < in.txt' },
        },
      ],
    });
    expect(plan.status).toBe(202);
    const planId = plan.body.id;
    let pending: any;
    for (let i = 0; i < 200 && !pending; i++) {
      pending = (await engine.request('GET', '/v1/approvals')).body.approvals.find(
        (a: any) => a.sessionId === sid,
      );
      if (!pending) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(pending).toMatchObject({ tool: 'bash', layer: 'plan', tier: 'subprocess' });
    expect((await engine.request('GET', `/v1/sessions/${sid}/plans/${planId}`)).body.status).toBe('running');
    await as(ADMIN_KEY).request('POST', `/v1/sessions/${sid}/actions/${pending.actionId}/approve`);
    as(TENANT_KEY);
    let final: any;
    for (let i = 0; i < 300; i++) {
      final = (await engine.request('GET', `/v1/sessions/${sid}/plans/${planId}`)).body;
      if (final.status !== 'running') break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(final.status).toBe('succeeded');
    // The plan's layer applies to its steps only: the same code outside the plan runs at once.
    expect(await engine.action(sid, { type: 'code', language: 'bash', code: 'echo free' })).toMatchObject({
      status: 'succeeded',
    });

    const asked = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { risk: '>=low', type: 'code' } }] },
    });
    const call = await engine.request('POST', `/v1/sessions/${asked}/tool-calls`, {
      id: 'c1',
      name: 'bash',
      input: { command: 'echo hi' },
    });
    expect(call.status).toBe(200);
    expect(call.body).toMatchObject({ tool_use_id: 'c1', is_error: false });
    expect(call.body.content).toMatch(/^\[pending approval\]/);
    const actionId = /action (act_[0-9a-f]+)/.exec(call.body.content)![1];
    await as(ADMIN_KEY).request('POST', `/v1/sessions/${asked}/actions/${actionId}/approve`);
    as(TENANT_KEY);
    expect(await ended(asked, actionId)).toMatchObject({ status: 'succeeded', stdout: 'hi\n' });
  });

  if (neo4j) {
    it('Neo4j holds the same approvals and decisions as the local store', async () => {
      await waitForGraph(engine, (g) => g.backlog === 0 && g.status === 'ok');
      as(TENANT_KEY);
      const sessions = (await engine.request('GET', '/v1/sessions')).body.sessions.map((s: any) => s.id);
      await withEngineStores(engine.dataDir, server, async (local, remote) => {
        await compareStores(local, remote, sessions, neo4j());
      });
    });
  }
}

describe('policies and approvals (embedded graph)', () => {
  policySuite(() => ({}));

  it('expires an approval nobody decides: denied, APPROVAL_EXPIRED', async () => {
    const engine = await EngineHarness.start({ SWITCHYARD_APPROVAL_TIMEOUT_MS: '1000' });
    try {
      const sid = await engine.createSession({ policy: { rules: [{ effect: 'ask', match: {} }] } });
      const r = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'file',
        op: 'list',
        path: '.',
      });
      expect(r.body.status).toBe('awaiting_approval');
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const done = await engine.request('GET', `/v1/sessions/${sid}/actions/${r.body.id}`);
      expect(done.body).toMatchObject({
        status: 'denied',
        error: { code: 'APPROVAL_EXPIRED' },
        approval: { decision: 'expired' },
      });
      // Open API (no keys): the session's own caller decides (SWITCHYARD_APPROVERS=tenant by default without admins).
      const again = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'file',
        op: 'list',
        path: '.',
      });
      expect(
        (await engine.request('POST', `/v1/sessions/${sid}/actions/${again.body.id}/approve`)).status,
      ).toBe(200);
    } finally {
      await engine.stop();
    }
  });
});

describe('policies and approvals (Neo4j graph)', () => {
  const held = holdTestNeo4j(server);
  policySuite(() => neo4jEnv(server), held.admin);
});
