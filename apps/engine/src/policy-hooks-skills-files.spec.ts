import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadEngineConfig } from './platform/config/engine-config';
import { boot, bootProblems } from './boot-files.testing';

const ROOT = path.resolve(__dirname, '..', '..', '..');

describe('policy, hooks and skills settings', () => {
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-governance-env-'));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  const problems = (env: Record<string, string>): string[] => bootProblems(env, cwd);
  const write = (name: string, text: string): string => {
    fs.writeFileSync(path.join(cwd, name), text);
    return name;
  };

  it('defaults: no engine rules, no hooks, no engine skills; approvals by the tenant without admins', () => {
    const { config: c, policy, hooks, skills } = boot({}, cwd);
    expect(policy).toEqual({ rules: [] });
    expect(hooks).toEqual([]);
    expect(skills).toEqual([]);
    expect(c.policy).toEqual({
      adminKeys: [],
      approvers: 'tenant',
      approvalTimeoutMs: 900_000,
    });
    expect(c.hooks).toEqual({ queue: 10_000, concurrency: 4 });
    expect(c.skills).toEqual({ maxDepth: 10, maxTenantSkills: 100 });
    expect(loadEngineConfig({ SWITCHYARD_ADMIN_KEYS: 'admin-key-0123456789' }, cwd).policy.approvers).toBe(
      'admin',
    );
  });

  it('reads the policy file (JSON or TOML) at boot, naming the variable and the rule at fault', () => {
    const json = write(
      'p.json',
      JSON.stringify({ rules: [{ effect: 'deny', match: { tool: 'browser_*' } }] }),
    );
    expect(boot({ SWITCHYARD_POLICY_FILE: json }, cwd).policy).toEqual({
      file: path.join(cwd, json),
      rules: [{ effect: 'deny', match: { tool: 'browser_*' } }],
    });
    const toml = write('p.toml', '[[rules]]\neffect = "ask"\n[rules.match]\nrisk = ">=high"\n');
    expect(boot({ SWITCHYARD_POLICY_FILE: toml }, cwd).policy.rules).toEqual([
      { effect: 'ask', match: { risk: '>=high' } },
    ]);
    const bad = write(
      'bad.json',
      // A back-reference: RE2 (linear time) cannot run it.
      JSON.stringify({ rules: [{ effect: 'deny', match: { tool: '/(a)\\1/' } }] }),
    );
    expect(problems({ SWITCHYARD_POLICY_FILE: bad })).toEqual([
      expect.stringMatching(
        /^SWITCHYARD_POLICY_FILE: .*bad\.json: policy\.rules\[0\]\.match\.tool: regular expression/,
      ),
    ]);
    expect(problems({ SWITCHYARD_POLICY_FILE: 'missing.json' })[0]).toMatch(
      /^SWITCHYARD_POLICY_FILE: .*ENOENT/,
    );
  });

  it('reads the hooks file at boot, naming the hook at fault', () => {
    const file = write(
      'hooks.json',
      JSON.stringify({ hooks: [{ name: 'a', phase: 'after', url: 'http://127.0.0.1:9/', secret: 'short' }] }),
    );
    expect(problems({ SWITCHYARD_HOOKS_FILE: file })).toEqual([
      expect.stringMatching(/^SWITCHYARD_HOOKS_FILE: .*hooks\.json: hooks\[0\]\.secret: /),
    ]);
  });

  it('loads the example skills, and names a skill directory that cannot be used', () => {
    const { skills } = boot({ SWITCHYARD_SKILLS_DIR: path.join(ROOT, 'examples', 'skills') }, cwd);
    expect(skills.map((s) => [s.name, s.language])).toEqual([
      ['file-report', 'node'],
      ['word-count', 'python'],
    ]);
    fs.mkdirSync(path.join(cwd, 'skills', 'ls'), { recursive: true });
    write('skills/ls/main.py', 'def main(input, ctx):\n    return {}\n');
    write(
      'skills/ls/skill.json',
      JSON.stringify({ name: 'ls', description: 'x', inputSchema: { type: 'object' }, outputSchema: {} }),
    );
    expect(problems({ SWITCHYARD_SKILLS_DIR: 'skills' })).toEqual([
      expect.stringMatching(/^SWITCHYARD_SKILLS_DIR: skill .*skills\/ls: ls is a built-in tool's name/),
    ]);
    expect(problems({ SWITCHYARD_SKILLS_DIR: 'nowhere' })[0]).toMatch(
      /^SWITCHYARD_SKILLS_DIR: .*nowhere: ENOENT/,
    );
  });
});
