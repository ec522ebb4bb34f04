import type { Language } from '@switchyard/common';

/**
 * The kernelspecs a session offers Jupyter clients: one per language of its session kernels. A Jupyter kernel of a
 * spec is a handle onto the session's kernel of that language (the one `state: "session"` code actions use).
 */
export const KERNELSPEC_NAMES = ['python3', 'javascript', 'bash'] as const;
export type KernelspecName = (typeof KERNELSPEC_NAMES)[number];

/** What `POST /api/kernels` starts without a `name`, and `GET /api/kernelspecs` names as the default. */
export const DEFAULT_KERNELSPEC: KernelspecName = 'python3';

export const LANGUAGE_OF: Readonly<Record<KernelspecName, Language>> = {
  python3: 'python',
  javascript: 'node',
  bash: 'bash',
};

export const isKernelspecName = (v: unknown): v is KernelspecName =>
  typeof v === 'string' && (KERNELSPEC_NAMES as readonly string[]).includes(v);

/** `language_info` of a `kernel_info_reply`: what editors and nbconvert need to treat the code. */
export interface LanguageInfo {
  name: string;
  version: string;
  mimetype: string;
  file_extension: string;
  pygments_lexer: string;
  codemirror_mode: string | { name: string; version: number };
  nbconvert_exporter?: string;
}

export const LANGUAGE_INFO: Readonly<Record<Language, LanguageInfo>> = {
  python: {
    name: 'python',
    version: '3',
    mimetype: 'text/x-python',
    file_extension: '.py',
    pygments_lexer: 'ipython3',
    codemirror_mode: { name: 'ipython', version: 3 },
    nbconvert_exporter: 'python',
  },
  node: {
    name: 'javascript',
    version: 'node',
    mimetype: 'application/javascript',
    file_extension: '.js',
    pygments_lexer: 'javascript',
    codemirror_mode: 'javascript',
  },
  bash: {
    name: 'bash',
    version: '5',
    mimetype: 'text/x-sh',
    file_extension: '.sh',
    pygments_lexer: 'bash',
    codemirror_mode: 'shell',
  },
};

const DISPLAY_NAMES: Readonly<Record<KernelspecName, string>> = {
  python3: 'Python 3 (Switchyard)',
  javascript: 'JavaScript (Node.js, Switchyard)',
  bash: 'Bash (Switchyard)',
};

/** A kernelspec as Jupyter serves it (`GET /api/kernelspecs/{name}`): nothing to launch here, so no `argv`. */
export interface KernelspecModel {
  name: KernelspecName;
  spec: {
    argv: string[];
    display_name: string;
    language: string;
    interrupt_mode: 'signal' | 'message';
    env: Record<string, string>;
    metadata: Record<string, unknown>;
  };
  resources: Record<string, string>;
}

export function kernelspecModel(name: KernelspecName): KernelspecModel {
  const language = LANGUAGE_OF[name];
  return {
    name,
    spec: {
      argv: [],
      display_name: DISPLAY_NAMES[name],
      language: LANGUAGE_INFO[language].name,
      // Interrupts come over REST (`POST …/interrupt`), as a gateway's clients send them.
      interrupt_mode: 'signal',
      env: {},
      metadata: { switchyard: { language } },
    },
    resources: {},
  };
}

export function kernelspecsModel(): {
  default: KernelspecName;
  kernelspecs: Record<KernelspecName, KernelspecModel>;
} {
  return {
    default: DEFAULT_KERNELSPEC,
    kernelspecs: {
      python3: kernelspecModel('python3'),
      javascript: kernelspecModel('javascript'),
      bash: kernelspecModel('bash'),
    },
  };
}
