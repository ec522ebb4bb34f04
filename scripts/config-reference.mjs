// Writes docs/reference/configuration.md from the engine's env schema classes (apps/engine/src/platform/config),
// so the reference cannot drift from the code: the variables, their defaults and bounds are read from the source
// (JSDoc exists only there), with TypeScript resolving the constants they name.
//
//   node scripts/config-reference.mjs            prints the reference
//   node scripts/config-reference.mjs --write    writes it
//   node scripts/config-reference.mjs --check    exits 1, with a diff, when the checked-in file is not current
//                                                (`npm run lint` runs this)
// `--file <path>` reads or writes another file than docs/reference/configuration.md.
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import prettier from 'prettier';
import ts from 'typescript';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(import.meta.url);
const configDir = path.join(root, 'apps', 'engine', 'src', 'platform', 'config');
const schemasFile = path.join(configDir, 'engine-env.ts');
const COMMAND = 'node scripts/config-reference.mjs --write';

/** Fails the script naming what it cannot document: a new construct must be taught here, not skipped. */
function unsupported(node, what) {
  const sf = node.getSourceFile();
  const { line } = sf.getLineAndCharacterOfPosition(node.getStart());
  throw new Error(`${path.relative(root, sf.fileName)}:${line + 1}: ${what}: ${node.getText()}`);
}

function createProgram() {
  const tsconfig = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(tsconfig.config, ts.sys, root);
  const program = ts.createProgram([schemasFile], {
    ...options,
    types: [],
    incremental: false,
    noEmit: true,
  });
  return { program, checker: program.getTypeChecker() };
}

// ---------------------------------------------------------------------------------------------------------------
// Constants: literals, arrays, objects and their fields, arithmetic and the names of constants, followed through
// imports.

const NOT_CONSTANT = Symbol('not constant');

function declarationOf(checker, identifier) {
  let symbol = checker.getSymbolAtLocation(identifier);
  if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  return symbol?.valueDeclaration ?? symbol?.declarations?.[0];
}

/** The value of a constant expression, or NOT_CONSTANT. */
function evaluate(checker, node) {
  if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node)) {
    return evaluate(checker, node.expression);
  }
  if (ts.isNumericLiteral(node)) return Number(node.text);
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (node.kind === ts.SyntaxKind.TrueKeyword) return true;
  if (node.kind === ts.SyntaxKind.FalseKeyword) return false;
  if (ts.isIdentifier(node) && node.text === 'undefined') return undefined;
  if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.MinusToken) {
    const value = evaluate(checker, node.operand);
    return typeof value === 'number' ? -value : NOT_CONSTANT;
  }
  if (ts.isRegularExpressionLiteral(node)) {
    const [, source, flags] = /^\/(.*)\/([a-z]*)$/s.exec(node.text);
    return new RegExp(source, flags);
  }
  if (ts.isObjectLiteralExpression(node)) {
    const entries = node.properties.map((p) =>
      ts.isPropertyAssignment(p) && !ts.isComputedPropertyName(p.name)
        ? [p.name.text, evaluate(checker, p.initializer)]
        : [p, NOT_CONSTANT],
    );
    return entries.some(([, v]) => v === NOT_CONSTANT) ? NOT_CONSTANT : Object.fromEntries(entries);
  }
  if (ts.isArrayLiteralExpression(node)) {
    const values = node.elements.map((e) => evaluate(checker, e));
    return values.includes(NOT_CONSTANT) ? NOT_CONSTANT : values;
  }
  if (ts.isBinaryExpression(node)) {
    const a = evaluate(checker, node.left);
    const b = evaluate(checker, node.right);
    if (a === NOT_CONSTANT || b === NOT_CONSTANT) return NOT_CONSTANT;
    switch (node.operatorToken.kind) {
      case ts.SyntaxKind.PlusToken:
        return a + b;
      case ts.SyntaxKind.MinusToken:
        return a - b;
      case ts.SyntaxKind.AsteriskToken:
        return a * b;
      case ts.SyntaxKind.SlashToken:
        return a / b;
      case ts.SyntaxKind.AsteriskAsteriskToken:
        return a ** b;
      default:
        return NOT_CONSTANT;
    }
  }
  if (ts.isPropertyAccessExpression(node)) {
    // A field of a constant object (`POOL_BOUNDS.min.max`), as libraries export the bounds they own.
    const object = evaluate(checker, node.expression);
    return object !== null && typeof object === 'object' && Object.hasOwn(object, node.name.text)
      ? object[node.name.text]
      : NOT_CONSTANT;
  }
  if (ts.isIdentifier(node)) {
    const declaration = declarationOf(checker, node);
    const isConst =
      declaration &&
      ts.isVariableDeclaration(declaration) &&
      declaration.initializer &&
      ts.getCombinedNodeFlags(declaration) & ts.NodeFlags.Const;
    return isConst ? evaluate(checker, declaration.initializer) : NOT_CONSTANT;
  }
  return NOT_CONSTANT;
}

function constant(checker, node, what) {
  const value = evaluate(checker, node);
  if (value === NOT_CONSTANT) unsupported(node, `${what} is not a constant`);
  return value;
}

// ---------------------------------------------------------------------------------------------------------------
// Comments and markdown.

/** The text of the JSDoc block right above `node`, on one line. */
function jsDocText(node) {
  const sf = node.getSourceFile();
  const ranges = ts.getLeadingCommentRanges(sf.text, node.getFullStart()) ?? [];
  const block = ranges.filter((r) => sf.text.startsWith('/**', r.pos)).at(-1);
  if (!block) return '';
  return sf.text
    .slice(block.pos + 3, block.end - 2)
    .split('\n')
    .map((line) => line.replace(/^\s*\*?\s?/, '').trim())
    .filter((line) => line.length > 0)
    .join(' ');
}

/** Prose for a table cell: markdown outside code spans is kept, but nothing may read as HTML, emphasis or a cell border. */
function prose(text) {
  return text
    .split(/(`[^`]*`)/)
    .map((part, i) => (i % 2 === 1 ? part : part.replace(/([*<>])/g, '\\$1')))
    .join('')
    .replace(/\|/g, '\\|');
}

const code = (text) => `\`${String(text).replace(/\|/g, '\\|')}\``;

/** Byte counts also in KiB/MiB/GiB when they are whole ones. */
function amount(variable, value) {
  if (!variable.endsWith('_BYTES') || value < 1024) return String(value);
  const units = [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ];
  const [unit, size] = units.find(([, size]) => value % size === 0) ?? [];
  return unit ? `${value} (${value / size} ${unit})` : String(value);
}

// ---------------------------------------------------------------------------------------------------------------
// A variable: its default and what its decorators allow.

/** The comment's own account of a default it computes ("Default: SWITCHYARD_MAX_TIMEOUT_MS."). */
function documentedDefault(doc) {
  return /\bDefault:?\s+(.+?)(?:\.\s|\.$|$)/.exec(doc)?.[1];
}

function describeDefault(checker, variable, initializer, doc) {
  if (!initializer) unsupported(variable.node, 'an env variable without an initializer (its default)');
  const value = evaluate(checker, initializer);
  if (value === NOT_CONSTANT) return code(initializer.getText());
  if (value === undefined) {
    const documented = documentedDefault(doc);
    return documented ? prose(documented) : 'unset';
  }
  if (Array.isArray(value)) return value.length === 0 ? 'empty' : code(value.join(','));
  if (typeof value === 'number') return amount(variable.name, value);
  return code(value);
}

/** `ValidateIf((e) => e.X === 'v')` as "only checked with X=v". */
function describeCondition(checker, call) {
  const [fn] = call.arguments;
  const body = fn && (ts.isArrowFunction(fn) || ts.isFunctionExpression(fn)) ? fn.body : undefined;
  if (
    body &&
    ts.isBinaryExpression(body) &&
    body.operatorToken.kind === ts.SyntaxKind.EqualsEqualsEqualsToken &&
    ts.isPropertyAccessExpression(body.left)
  ) {
    return `checked only with ${body.left.name.text}=${constant(checker, body.right, 'the condition')}`;
  }
  return `checked only when ${code(fn?.getText() ?? call.getText())}`;
}

/** What one decorator allows, or null when it allows anything (it only marks the variable optional). */
function describeDecorator(checker, variable, expression) {
  if (ts.isIdentifier(expression)) {
    // A decorator kept in a constant (`const neo4jOnly = ValidateIf(...)`).
    const declaration = declarationOf(checker, expression);
    if (declaration && ts.isVariableDeclaration(declaration) && declaration.initializer) {
      return describeDecorator(checker, variable, declaration.initializer);
    }
    unsupported(expression, 'an unknown decorator');
  }
  if (!ts.isCallExpression(expression) || !ts.isIdentifier(expression.expression)) {
    unsupported(expression, 'an unknown decorator');
  }
  if (expression.expression.text === 'ValidateIf') return describeCondition(checker, expression);
  const args = expression.arguments.map((a) => constant(checker, a, 'a decorator argument'));
  const each = (options) => (options?.each ? 'each ' : '');
  const range = (min, max) =>
    max === undefined ? `≥ ${amount(variable, min)}` : `${amount(variable, min)} – ${amount(variable, max)}`;
  switch (expression.expression.text) {
    case 'IsOptional':
      return null;
    case 'IntVar':
      return `integer ${range(args[0], args[1])}`;
    case 'DecimalVar':
      return `number ${range(args[0], args[1])}`;
    case 'BoolVar':
      return 'flag';
    case 'ListVar':
      return 'comma-separated list';
    case 'AbsolutePathVar':
      return 'absolute path';
    case 'IsString':
      return `${each(args[0])}string`;
    case 'IsIn':
      return `one of ${args[0].map(code).join(', ')}`;
    case 'MinLength':
      return `${each(args[1])}at least ${args[0]} character${args[0] === 1 ? '' : 's'}`;
    case 'Matches': {
      const [pattern, options] = args;
      const message = options?.message ? `: ${prose(options.message)}` : '';
      return `${each(options)}matching ${code(pattern.source)}${message}`;
    }
    default:
      return unsupported(expression, 'an unknown decorator');
  }
}

function describeVariable(checker, member) {
  const name = member.name.getText();
  const doc = jsDocText(member);
  const variable = { node: member, name };
  const decorators = (ts.getDecorators(member) ?? []).map((d) => d.expression);
  const allowed = decorators.map((d) => describeDecorator(checker, name, d)).filter((d) => d !== null);
  return {
    name,
    default: describeDefault(checker, variable, member.initializer, doc),
    allowed: allowed.length > 0 ? allowed : ['any string'],
    meaning: doc ? prose(doc) : '—',
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The areas, in the order of ENGINE_ENV_SCHEMAS, and the checks beyond a variable's own decorators.

function schemaClasses(checker, program) {
  const sf = program.getSourceFile(schemasFile);
  let list;
  sf.forEachChild(function visit(node) {
    if (ts.isVariableDeclaration(node) && node.name.getText() === 'ENGINE_ENV_SCHEMAS')
      list = node.initializer;
    node.forEachChild(visit);
  });
  while (list && (ts.isAsExpression(list) || ts.isParenthesizedExpression(list))) list = list.expression;
  if (!list || !ts.isArrayLiteralExpression(list))
    throw new Error('ENGINE_ENV_SCHEMAS: no array literal found');
  return list.elements.map((element) => {
    const declaration = declarationOf(checker, element);
    if (!declaration || !ts.isClassDeclaration(declaration)) unsupported(element, 'not a class');
    return declaration;
  });
}

function describeArea(checker, declaration) {
  const variables = declaration.members
    .filter(
      (m) => ts.isPropertyDeclaration(m) && !m.modifiers?.some((x) => x.kind === ts.SyntaxKind.StaticKeyword),
    )
    .map((m) => describeVariable(checker, m));
  return { name: declaration.name.text, description: prose(jsDocText(declaration)), variables };
}

/** The config's own source files (tests and test helpers left out). */
function configSources(program) {
  return readdirSync(configDir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts') && !f.endsWith('.testing.ts'))
    .sort()
    .map((f) => program.getSourceFile(path.join(configDir, f)) ?? sourceFileOf(path.join(configDir, f)));
}

function sourceFileOf(file) {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
}

/** The constant strings an expression may be: a literal, a constant, or either side of `cond ? a : b`. */
function constantStrings(checker, node) {
  if (ts.isConditionalExpression(node)) {
    return [...constantStrings(checker, node.whenTrue), ...constantStrings(checker, node.whenFalse)];
  }
  const value = evaluate(checker, node);
  return typeof value === 'string' ? [value] : [];
}

/**
 * A problem's message, when it does not depend on the value: a constant, or a template whose only part that does
 * is the closing "(got …)".
 */
function fixedMessage(checker, node) {
  const value = evaluate(checker, node);
  if (typeof value === 'string') return value;
  if (ts.isTemplateExpression(node)) {
    const head = /^(.+?)\s*\(got "?$/.exec(node.head.text);
    if (head) return head[1];
  }
  return undefined;
}

/**
 * `[variable, note]` for every check past the decorators: the CEILINGS and FLOORS of engine-env.ts, and each
 * problem the config files report with a message that does not depend on the value.
 */
function crossChecks(checker, program) {
  const notes = [];
  const pairs = (name) => {
    const sf = program.getSourceFile(schemasFile);
    let found;
    sf.forEachChild((node) => {
      if (!ts.isVariableStatement(node)) return;
      for (const d of node.declarationList.declarations) if (d.name.getText() === name) found = d;
    });
    if (!found) throw new Error(`engine-env.ts: ${name} not found`);
    return constant(checker, found.initializer, name);
  };
  for (const [variable, bound] of pairs('CEILINGS')) notes.push([variable, `must not exceed ${code(bound)}`]);
  for (const [variable, bound] of pairs('FLOORS')) notes.push([variable, `must not be below ${code(bound)}`]);
  for (const sf of configSources(program)) {
    sf.forEachChild(function visit(node) {
      if (
        ts.isCallExpression(node) &&
        node.expression.getText() === 'configFailure' &&
        node.arguments.length >= 2
      ) {
        const message = fixedMessage(checker, node.arguments[1]);
        if (message)
          for (const v of constantStrings(checker, node.arguments[0])) notes.push([v, prose(message)]);
      }
      if (ts.isObjectLiteralExpression(node)) {
        const prop = (name) =>
          node.properties.find((p) => ts.isPropertyAssignment(p) && p.name.getText() === name)?.initializer;
        const variable = prop('variable');
        const message = variable && prop('message') && fixedMessage(checker, prop('message'));
        if (message) for (const v of constantStrings(checker, variable)) notes.push([v, prose(message)]);
      }
      node.forEachChild(visit);
    });
  }
  return notes;
}

// ---------------------------------------------------------------------------------------------------------------
// Variables read elsewhere: found by name (`process.env.X`, `process.env['X']`) in apps/ and libs/.

function sourceFilesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|tsx|mts|cts|js|mjs)$/.test(e.name))
    .map((e) => path.join(e.parentPath, e.name))
    .filter((f) => !/[\\/](node_modules|dist)[\\/]/.test(f));
}

/** Spec files are left out: what a test sets up for itself configures nothing. */
function envReadsOutsideSchemas() {
  const reads = { engine: new Map(), tests: new Map() };
  const files = ['apps', 'libs'].flatMap((d) => sourceFilesUnder(path.join(root, d)));
  for (const file of files.sort()) {
    const rel = path.relative(root, file).split(path.sep).join('/');
    if (/\.(e2e-)?spec\.[a-z]+$/.test(rel) || path.dirname(file) === configDir) continue;
    const kind = /\.testing\.[a-z]+$|\/(test|bench)\//.test(rel) ? 'tests' : 'engine';
    for (const m of readFileSync(file, 'utf8').matchAll(
      /process\.env(?:\.([A-Za-z_]\w*)|\[\s*['"]([^'"]+)['"]\s*\])/g,
    )) {
      const name = m[1] ?? m[2];
      const where = reads[kind].get(name) ?? new Set();
      where.add(rel);
      reads[kind].set(name, where);
    }
  }
  return reads;
}

// ---------------------------------------------------------------------------------------------------------------
// The document.

function envReadsTable(reads) {
  return [
    '| Variable | Read by |',
    '| --- | --- |',
    ...[...reads]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, files]) => `| ${code(name)} | ${[...files].map(code).join(', ')} |`),
  ].join('\n');
}

function render(areas, notes, reads) {
  const seen = new Set();
  for (const v of areas.flatMap((a) => a.variables)) {
    if (seen.has(v.name)) throw new Error(`${v.name} is declared in more than one schema class`);
    seen.add(v.name);
  }
  for (const [variable] of notes) {
    if (!seen.has(variable)) throw new Error(`a check names ${variable}, which no schema class declares`);
  }
  const notesOf = (name) => notes.filter(([v]) => v === name).map(([, note]) => note);
  const lines = [
    '# Configuration reference',
    '',
    '<!-- Generated by scripts/config-reference.mjs from apps/engine/src/platform/config: do not edit. -->',
    '',
    'Every environment variable the engine reads, generated from the schema classes that validate them at start-up' +
      ` (\`apps/engine/src/platform/config/*-env.ts\`). Regenerate it with \`${COMMAND}\`;` +
      ' `npm run lint` fails when it is not current.',
    '',
    'Every variable is optional. A value outside its bounds stops start-up, naming the variable.' +
      ' A _flag_ is `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`/empty; a _list_ is comma-separated, blanks' +
      ' around entries dropped. Bounds are inclusive. Sizes and durations are plain integers in the unit the name' +
      ' ends with (`_BYTES`, `_MS`, `_SECONDS`); byte counts are also shown in KiB, MiB or GiB for reading.',
    '',
    '## Areas',
    '',
    ...areas.map((a) => `- [${a.name}](#${a.name.toLowerCase()}): ${a.description}`),
  ];
  for (const area of areas) {
    lines.push('', `## ${area.name}`, '', area.description, '');
    lines.push('| Variable | Default | Allowed values / bounds | Meaning |', '| --- | --- | --- | --- |');
    for (const v of area.variables) {
      const allowed = [...v.allowed, ...notesOf(v.name)].join('; ');
      lines.push(`| ${code(v.name)} | ${v.default} | ${allowed} | ${v.meaning} |`);
    }
  }
  lines.push(
    '',
    '## Variables read outside these classes',
    '',
    'Found by name (`process.env.NAME`) in `apps/` and `libs/`, spec files left out.',
    '',
    '### Engine code',
    '',
    reads.engine.size === 0
      ? 'None: the engine reads its environment only through the classes above (`loadEngineConfig`). Redaction also' +
          ' reads the values of the variables `SWITCHYARD_SECRET_ENV_NAMES` names, and of the ones whose names look secret.'
      : envReadsTable(reads.engine),
    '',
    '### Test helpers and benchmarks',
    '',
    'These configure test runs, not the engine.',
    '',
    reads.tests.size === 0 ? 'None.' : envReadsTable(reads.tests),
    '',
  );
  return lines.join('\n');
}

async function generate(file) {
  const { program, checker } = createProgram();
  const areas = schemaClasses(checker, program).map((c) => describeArea(checker, c));
  const text = render(areas, crossChecks(checker, program), envReadsOutsideSchemas());
  const options = (await prettier.resolveConfig(file)) ?? {};
  return prettier.format(text, { ...options, filepath: file, parser: 'markdown' });
}

function readOrEmpty(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if (err.code === 'ENOENT') return '';
    throw err;
  }
}

const args = process.argv.slice(2);
const fileArg = args.indexOf('--file');
const file =
  fileArg >= 0 ? path.resolve(args[fileArg + 1]) : path.join(root, 'docs', 'reference', 'configuration.md');
const text = await generate(file);
if (args.includes('--write')) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
} else if (args.includes('--check')) {
  const current = readOrEmpty(file);
  if (current !== text) {
    const { createTwoFilesPatch } = require('diff');
    const rel = path.relative(root, file);
    process.stderr.write(createTwoFilesPatch(`${rel} (checked in)`, `${rel} (from the code)`, current, text));
    process.stderr.write(`\n${rel} is not current: run \`${COMMAND}\`.\n`);
    process.exit(1);
  }
} else {
  process.stdout.write(text);
}
