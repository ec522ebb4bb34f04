import type { Language } from '@switchyard/common';
import { targetsOnlyLoopback } from './loopback-targets';

/** `any` patterns apply to every language: shell commands are just as dangerous inside `os.system("…")`. */
export type RulePatterns = Partial<Record<Language | 'any', RegExp[]>>;

/**
 * One named, weighted signal. A rule matches when any of its patterns (or its `detect`) matches and its
 * `unless` pattern does not; it then adds its weight once, however often it matches.
 */
export interface RiskRule {
  id: string;
  weight: number;
  description: string;
  patterns?: RulePatterns;
  /** For shapes one regular expression cannot express; returns what matched. */
  detect?: (code: string, language: Language) => string | undefined;
  /** When this matches the rule does not apply (e.g. a `while True` that has a `break`). */
  unless?: Partial<Record<Language, RegExp>>;
  /** Like `unless`, for shapes one regular expression cannot express. */
  except?: (code: string, language: Language) => boolean;
}

// A path outside what the sandbox lets code write: anything absolute but /workspace, /tmp and the std streams.
const OUTSIDE = String.raw`(?:/(?!(?:workspace|tmp)(?![\w.-])|dev/(?:null|stdout|stderr|fd/))|~|\$HOME\b|\$\{HOME\})`;
const Q = `['"\`]`;
const SYSTEM_DIR = String.raw`(?:bin|boot|dev|etc|home|lib|lib32|lib64|opt|proc|root|run|sbin|srv|sys|usr|var)`;
// Shell command position: start of line or after a separator / quote / substitution.
const CMD = String.raw`(?:^|[;&|({\x60'"]|\$\()[ \t]*`;

/** Finds a loop line followed, within `window` lines, by `body`. Linear in the code size. */
function loopWith(code: string, loop: RegExp, body: RegExp, window = 4): string | undefined {
  const lines = code.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const head = loop.exec(lines[i]);
    if (!head) continue;
    const rest = [lines[i].slice(head.index + head[0].length), ...lines.slice(i + 1, i + window)].join('\n');
    const hit = body.exec(rest);
    if (hit) return `${head[0].trim()} … ${hit[0].trim()}`;
  }
  return undefined;
}

const DECODE =
  /\b(?:b64decode|b32decode|a2b_base64|unhexlify|fromhex|atob)\s*\(|Buffer\.from\([^)]{0,200},\s*['"](?:base64|hex)['"]|\bbase64\s+(?:-d|--decode|-D)\b|\bxxd\s+-r\b|codecs\.decode\(/;
const RUN_DECODED: Record<Language, RegExp> = {
  python: /(?<![\w.])(?:exec|eval)\s*\(|\bcompile\s*\(|\bos\.system\s*\(|\bsubprocess\.\w+\s*\(/,
  node: /(?<![\w.])eval\s*\(|\bFunction\s*\(|\bvm\.\w+|child_process/,
  bash: /\|\s*(?:ba|da|z)?sh\b|\beval\b|\bsource\s+\/dev\/stdin|\b(?:ba)?sh\s+-c\s+"?\$\(/,
};

export const DEFAULT_RISK_RULES: readonly RiskRule[] = [
  {
    id: 'network',
    weight: 35,
    description:
      'opens network connections (sockets, HTTP clients, curl/wget/nc, /dev/tcp) to anything but the loopback ' +
      "(code that only names localhost/127.0.0.1/::1 reaches the sandbox's own servers, nothing outside it)",
    except: targetsOnlyLoopback,
    patterns: {
      python: [
        /^[ \t]*(?:import|from)[ \t]+(?:socket|requests|urllib3?|http\.client|httpx|aiohttp|ftplib|smtplib|telnetlib|paramiko|websockets?|pycurl)\b.*$/m,
        /\bsocket\.(?:socket|create_connection|connect)\b/,
        /\b(?:urllib\.request|requests|httpx)\.\w+\s*\(/,
        /\basyncio\.open_connection\b/,
        /['"]\s*(?:curl|wget|nc|ncat|netcat|socat|telnet|ssh|scp)\b/,
      ],
      node: [
        /\brequire\(\s*['"](?:node:)?(?:net|http|https|http2|dgram|tls|dns|undici)['"]\s*\)/,
        /\bfrom\s+['"](?:node:)?(?:net|http|https|http2|dgram|tls|dns|undici)['"]/,
        /\bimport\(\s*['"](?:node:)?(?:net|http|https|http2|dgram|tls|dns)['"]\s*\)/,
        /(?<![\w.])fetch\s*\(/,
        /\bnew\s+(?:WebSocket|XMLHttpRequest|EventSource)\b/,
        /['"`]\s*(?:curl|wget|nc|ncat|netcat|socat|telnet|ssh|scp)\b/,
      ],
      bash: [
        new RegExp(
          String.raw`${CMD}(?:curl|wget|nc|ncat|netcat|socat|telnet|ssh|scp|sftp|ftp|rsync|nmap|ping)\b`,
          'm',
        ),
        // git's network subcommands: a clone or fetch reaches a remote like curl does.
        new RegExp(
          String.raw`${CMD}git\s+(?:-\S+(?:\s+[^-\s]\S*)?\s+)*(?:clone|fetch|pull|push|ls-remote)\b`,
          'm',
        ),
        /\/dev\/(?:tcp|udp)\//,
      ],
    },
  },
  {
    id: 'spawn',
    weight: 30,
    description: 'starts other processes (subprocess, os.system, child_process, background jobs)',
    patterns: {
      python: [
        /\bsubprocess\b/,
        /\bos\.(?:system|popen|fork|forkpty|spawn\w*|exec\w*|posix_spawn\w*)\s*\(/,
        /\bpty\.spawn\b/,
        /\bmultiprocessing\b/,
        /\basyncio\.create_subprocess_\w+/,
        /\bpexpect\b/,
      ],
      node: [
        /\bchild_process\b/,
        /\brequire\(\s*['"](?:node:)?cluster['"]\s*\)/,
        /\b(?:execSync|spawnSync|execFileSync)\s*\(/,
      ],
      bash: [
        new RegExp(
          String.raw`${CMD}(?:nohup|setsid|disown|xargs|parallel|exec\s+(?![\d<>{])[\w/.]|(?:ba|da|z)?sh\s+-c)\b`,
          'm',
        ),
        /(?<![&>|<])&(?![&>])/,
      ],
    },
  },
  {
    id: 'write-outside-workspace',
    weight: 30,
    description: 'writes to absolute paths outside /workspace and /tmp (/etc, /usr, ~)',
    patterns: {
      python: [
        new RegExp(
          String.raw`\bopen\(\s*[rbfu]*${Q}${OUTSIDE}[^'"]{0,200}${Q}\s*,\s*(?:mode\s*=\s*)?[rbfu]*${Q}[rbt]*[wax+]`,
        ),
        new RegExp(
          String.raw`\bPath\(\s*${Q}${OUTSIDE}[^'"]{0,200}${Q}\s*\)\s*\.\s*(?:write_text|write_bytes|touch|mkdir|symlink_to|unlink|rename|chmod)\b`,
        ),
        new RegExp(
          String.raw`\bos\.(?:makedirs|mkdir|rename|replace|symlink|link|chmod|chown|remove|unlink|rmdir)\(\s*${Q}${OUTSIDE}`,
        ),
        new RegExp(String.raw`\bshutil\.(?:copy\w*|move)\([^)]{0,200},\s*${Q}${OUTSIDE}`),
      ],
      node: [
        new RegExp(
          String.raw`\b(?:writeFile|appendFile|createWriteStream|mkdir|rm|rmdir|unlink|rename|copyFile|symlink|chmod|chown|cp|truncate)(?:Sync)?\s*\(\s*${Q}${OUTSIDE}`,
        ),
      ],
      bash: [
        new RegExp(String.raw`(?:^|[^<>&0-9])\d?>{1,2}\|?\s*${OUTSIDE}`, 'm'),
        new RegExp(String.raw`\btee\s+(?:-a\s+)?${OUTSIDE}`),
        new RegExp(
          String.raw`${CMD}(?:cp|mv|ln|install|rsync)\b[^\n;|&]{0,200}\s${OUTSIDE}[^\s;|&]{0,200}\s*(?:$|[;|&])`,
          'm',
        ),
        new RegExp(
          String.raw`${CMD}(?:touch|mkdir|chmod|chown|chgrp|truncate|rm|rmdir|unlink)\b[^\n;|&]{0,200}\s${OUTSIDE}`,
          'm',
        ),
        new RegExp(String.raw`\bsed\s+-i\S*\s+(?:[^\s;|&]+\s+){0,3}${OUTSIDE}`),
      ],
    },
  },
  {
    id: 'destructive',
    weight: 90,
    description:
      'destroys data outside the workspace (rm -rf /, mkfs, dd to a device, rmtree of an absolute path)',
    patterns: {
      any: [
        new RegExp(
          String.raw`\brm\s+(?:-{1,2}[\w-]+\s+){0,6}(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\s+(?:-{1,2}[\w-]+\s+){0,6}['"]?(?:/\*?|~/?\*?|\$HOME/?\*?|/${SYSTEM_DIR}/?\*?)['"]?(?=\s|$|[;&|)'"])`,
          'm',
        ),
        /--no-preserve-root\b/,
        /\bmkfs(?:\.\w+)?\b|\bmke2fs\b|\bwipefs\b/,
        /\bdd\s+(?:\S+\s+){0,6}of=\/dev\/(?!null\b|zero\b|stdout\b|stderr\b)/,
        /(?:^|[^<])>\s*\/dev\/(?:sd[a-z]|nvme|vd[a-z]|xvd|hd[a-z]|mmcblk|disk|mapper)/m,
        /\bshred\b[^\n]{0,200}\/dev\//,
        /\bchmod\s+-R\s+\S+\s+\/(?=\s|$)/m,
        /\bchown\s+-R\s+\S+\s+\/(?=\s|$)/m,
      ],
      python: [new RegExp(String.raw`\bshutil\.rmtree\(\s*${Q}${OUTSIDE}`)],
      node: [
        new RegExp(
          String.raw`\b(?:rm|rmdir)(?:Sync)?\s*\(\s*${Q}${OUTSIDE}[^'"\x60]{0,200}${Q}\s*,\s*\{[^}]{0,200}recursive\s*:\s*true`,
        ),
      ],
    },
  },
  {
    id: 'privilege-escalation',
    weight: 60,
    description: 'tries to gain privileges or leave the sandbox (sudo, su, setuid, chmod +s, nsenter, mount)',
    patterns: {
      any: [
        new RegExp(
          String.raw`${CMD}(?:sudo|doas|pkexec|nsenter|unshare|chroot|capsh|setcap|insmod|modprobe|mount|umount)\b`,
          'm',
        ),
        new RegExp(String.raw`${CMD}su(?:\s+-\w*|\s+root\b)?\s*(?:$|[;&|)'"])`, 'm'),
        /\bchmod\s+(?:-\w+\s+){0,6}(?:[ugoa]*[+=][rwxt]*s|0?[2467][0-7]{3})\b/,
        /\/etc\/sudoers|docker\.sock|\/dev\/k?mem\b|\/proc\/sys\/kernel\b|\/proc\/sysrq-trigger/,
      ],
      python: [
        /\bos\.set(?:e|re|res)?[ug]id\s*\(/,
        /\bos\.chmod\s*\([^)]{0,200},\s*0o?[2467][0-7]{3}\b/,
        /\bctypes\b[^\n]{0,200}\b(?:mount|unshare|setns|ptrace)\b/,
      ],
      node: [/\bprocess\.set(?:e)?[ug]id\s*\(/, /\bchmod(?:Sync)?\s*\([^)]{0,200},\s*0o?[2467][0-7]{3}\b/],
    },
  },
  {
    id: 'secrets',
    weight: 50,
    description: 'reads credential files or other processes’ environments (~/.ssh, .aws, /proc/*/environ)',
    patterns: {
      any: [
        /\/proc\/[^/\s'"]+\/environ\b/,
        /~\/\.ssh\b|\/\.ssh\/(?:id_\w+|authorized_keys|known_hosts|config)\b|\/root\/\.ssh\b/,
        /\.aws\/(?:credentials|config)\b/,
        /\/etc\/(?:shadow|gshadow|sudoers)\b/,
        /\.netrc\b|\.git-credentials\b|\.pypirc\b|\.npmrc\b|\.docker\/config\.json\b|\.kube\/config\b/,
        /\/var\/run\/secrets\b|\/run\/secrets\b/,
        /169\.254\.169\.254|metadata\.google\.internal/,
      ],
    },
  },
  {
    id: 'env-read',
    weight: 25,
    description: 'reads the environment (os.environ, process.env, printenv)',
    patterns: {
      python: [
        /\bos\.environ\b/,
        /\bos\.getenv(?:b)?\s*\(/,
        /\bfrom\s+os\s+import\b[^\n]{0,200}\b(?:environ|getenv)\b/,
      ],
      node: [/\bprocess\.env\b/],
      bash: [
        new RegExp(String.raw`${CMD}(?:printenv|env)\s*(?:$|[;&|)>])`, 'm'),
        new RegExp(String.raw`${CMD}printenv\b`, 'm'),
        /\b(?:export|declare|typeset)\s+-[a-zA-Z]*[px]\b/,
        new RegExp(String.raw`${CMD}set\s*(?:$|[;&|)>])`, 'm'),
        /\bcompgen\s+-[ev]\b/,
      ],
    },
  },
  {
    id: 'package-install',
    weight: 35,
    description: 'installs packages (pip, npm, apt, …): downloads and runs code the policy never saw',
    patterns: {
      any: [
        /\bpip3?\s+install\b|-m\s+pip\s+install\b/,
        /\b(?:npm|pnpm)\s+(?:i|install|add|ci)\b|\byarn\s+(?:add|install)\b|\bnpx\s+\S/,
        /\bapt(?:-get)?\s+(?:install|update)\b|\bapk\s+add\b|\b(?:yum|dnf|zypper|brew|conda|gem|cargo)\s+install\b|\bgo\s+(?:install|get)\b/,
      ],
      python: [/\bpip\.main\s*\(|\bfrom\s+pip\._internal\b/, /['"]pip3?['"]\s*,\s*['"]install['"]/],
      node: [/['"`](?:npm|pnpm|yarn)['"`]\s*,\s*\[?\s*['"`](?:i|install|add|ci)['"`]/],
    },
  },
  {
    id: 'dynamic-eval',
    weight: 25,
    description: 'runs code built at run time (eval, exec, Function, vm, source <(…), piping into a shell)',
    patterns: {
      python: [
        /(?<![\w.])(?:eval|exec)\s*\(/,
        /\bcompile\s*\([^)]{0,200}['"]exec['"]/,
        /\b__import__\s*\(/,
        /\bimportlib\.import_module\s*\(/,
        /\b(?:marshal|pickle)\.loads?\b/,
        /\bctypes\b/,
      ],
      node: [
        /(?<![\w.])eval\s*\(/,
        /(?<![\w.])(?:new\s+)?Function\s*\(/,
        /\bvm\.(?:runIn\w+|Script|compileFunction|SourceTextModule)\b/,
        /\brequire\(\s*['"](?:node:)?vm['"]\s*\)/,
        /\bset(?:Timeout|Interval)\s*\(\s*['"`]/,
        /\bprocess\.(?:binding|dlopen)\b/,
      ],
      bash: [
        new RegExp(String.raw`${CMD}eval\s`, 'm'),
        /\b(?:source|\.)\s+<\(/,
        /\|\s*(?:ba|da|z)?sh\b(?!\w)/,
        /\b(?:ba)?sh\s+-c\s+"?\$\(/,
      ],
    },
  },
  {
    id: 'obfuscation',
    weight: 45,
    description: 'hides what it runs (decode-then-exec, long base64/hex blobs, char-code strings)',
    detect: (code, language) => {
      const decoded = DECODE.exec(code);
      const run = decoded && RUN_DECODED[language].exec(code);
      return decoded && run ? `${decoded[0].trim()} … ${run[0].trim()}` : undefined;
    },
    patterns: {
      any: [
        /(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{200,}={0,2}/,
        /(?<!\\x[0-9a-fA-F]{2})(?:\\x[0-9a-fA-F]{2}){24,}/,
        /\b[0-9a-fA-F]{160,}\b/,
        /String\.fromCharCode\((?:\s*\d+\s*,){12,}/,
        /(?:chr\(\d+\)\s*\+\s*){8,}/,
      ],
    },
  },
  {
    id: 'fork-bomb',
    weight: 100,
    description: 'spawns processes without bound (:(){ :|:& };:, fork in a loop)',
    patterns: {
      any: [
        /:\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;?\s*:/,
        /\bos\.fork\(\)\s*(?:and|or|\+|;)\s*os\.fork\(\)/,
      ],
      bash: [
        /\b(\w+)\s*\(\s*\)\s*\{[^}]{0,200}\b\1\s*\|\s*\1\s*&/,
        /(?:\$0|\$\{0\}|\$BASH_SOURCE)\s*(?:\|\s*(?:\$0|\$\{0\})\s*)?&/,
      ],
    },
    detect: (code, language) => {
      switch (language) {
        case 'python':
          return loopWith(code, /^\s*(?:while|for)\b[^\n]{0,200}:/, /\bos\.fork(?:pty)?\s*\(/);
        case 'node':
          return loopWith(
            code,
            /\bfor\s*\(\s*;\s*;\s*\)|\bwhile\s*\(\s*(?:true|1|!0)\s*\)/,
            /(?:child_process|\bcp|\bcluster)\.\w+\s*\(|(?<![\w.])(?:fork|spawn|exec|execFile)(?:Sync)?\s*\(/,
          );
        case 'bash':
          return loopWith(
            code,
            /\bwhile\s+(?:true|:|\[\s*1\s*\])(?=[\s;]|$)|\buntil\s+false\b|\bfor\s*\(\(\s*;\s*;\s*\)\)/,
            /(?<![&>|<])&(?![&>])/,
          );
      }
    },
  },
  {
    id: 'unbounded-loop',
    weight: 15,
    description: 'loops forever with no way out (while True without break, for(;;), while :)',
    patterns: {
      python: [/^[ \t]*while[ \t]+(?:True|1|not[ \t]+False)[ \t]*:/m],
      node: [/\bfor\s*\(\s*;\s*;\s*\)|\bwhile\s*\(\s*(?:true|1|!0)\s*\)/],
      bash: [/\bwhile\s+(?:true|:|\[\s*1\s*\])(?=[\s;]|$)|\buntil\s+false\b|\bfor\s*\(\(\s*;\s*;\s*\)\)/m],
    },
    unless: {
      python: /\b(?:break|return|raise)\b|\bsys\.exit\b|\bos\._exit\b|\bexit\s*\(/,
      node: /\b(?:break|return|throw)\b|\bprocess\.exit\b/,
      bash: /\b(?:break|exit|return)\b/,
    },
  },
];
