import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseDocument, stringify } from 'yaml';
import { formatPath } from '../issue-words.js';
import { type Config, parseConfig } from './schema.js';
import { unknownEnvironmentVariables } from './unknown-variables.js';
import { withoutApiSuffix } from './api-suffix.js';
import { MASK, maskUrl, maskUrls } from './mask.js';
import { USAGE } from './help-text.js';

/**
 * Where the configuration comes from, lowest precedence first: the defaults,
 * the YAML file (`--config`, else `COMPACTOR_CONFIG`), `COMPACTOR_*`
 * environment variables, command-line flags. Overrides are applied to the raw
 * document before validation, so a bad value is reported at its path (and
 * with its source) like any other.
 */

/** How an override's text becomes a value; the schema then checks it like any other. */
type OverrideKind = 'text' | 'integer' | 'boolean' | 'list' | 'text or list';

interface Override { readonly path: readonly string[]; readonly kind?: OverrideKind }

/** The keys people change most, by environment variable. */
const ENVIRONMENT_OVERRIDES: Readonly<Record<string, Override>> = {
  COMPACTOR_HOST: { path: ['listen', 'host'] },
  COMPACTOR_PORT: { path: ['listen', 'port'], kind: 'integer' },
  COMPACTOR_UPSTREAM_URL: { path: ['upstream', 'url'], kind: 'text or list' },
  COMPACTOR_UPSTREAM_API_KEY: { path: ['upstream', 'api_key'] },
  COMPACTOR_CONTEXT_WINDOW: { path: ['models', '*', 'context_window'], kind: 'integer' },
  COMPACTOR_COMPACTION: { path: ['compaction', 'enabled'], kind: 'boolean' },
  COMPACTOR_MAX_MESSAGES: { path: ['compaction', 'max_messages'], kind: 'integer' },
  COMPACTOR_MAX_CONNECTIONS: { path: ['limits', 'max_connections'], kind: 'integer' },
  COMPACTOR_COMPRESS: { path: ['compaction', 'compress', 'enabled'], kind: 'boolean' },
  COMPACTOR_MODE: { path: ['compaction', 'mode'] },
  COMPACTOR_SUMMARY_MODEL: { path: ['compaction', 'summary', 'model'] },
  COMPACTOR_SUMMARY_UPSTREAM: { path: ['compaction', 'summary', 'upstream'] },
  COMPACTOR_SUMMARY_API_KEY: { path: ['compaction', 'summary', 'api_key'] },
  COMPACTOR_SUMMARY_PROMPT_FILE: { path: ['compaction', 'summary', 'prompt_file'] },
  COMPACTOR_PAIRS: { path: ['pairs'] },
  COMPACTOR_AUTH_KEYS: { path: ['auth', 'keys'], kind: 'list' },
  COMPACTOR_ADMIN_KEYS: { path: ['auth', 'admin_keys'], kind: 'list' },
  COMPACTOR_DASHBOARD: { path: ['dashboard', 'enabled'], kind: 'boolean' },
  COMPACTOR_SLOTS: { path: ['upstream', 'slots'] },
  COMPACTOR_SLOT_SAVE: { path: ['upstream', 'slot_save'], kind: 'boolean' },
  COMPACTOR_SLOT_SAVE_SHARED: { path: ['upstream', 'slot_save_shared'], kind: 'boolean' },
  COMPACTOR_LOG_LEVEL: { path: ['log', 'level'] },
  COMPACTOR_LOG_FORMAT: { path: ['log', 'format'] },
  COMPACTOR_REDUCE_MEMORY: { path: ['memory', 'reduce_when_idle'], kind: 'boolean' },
  COMPACTOR_CACHE_STORE: { path: ['cache', 'store'] },
  COMPACTOR_REDIS_URL: { path: ['cache', 'redis', 'url'], kind: 'text or list' },
  COMPACTOR_REDIS_SECRET: { path: ['cache', 'redis', 'secret'] },
  COMPACTOR_REDIS_KEY_SALT: { path: ['cache', 'redis', 'key_salt'] },
  COMPACTOR_REDIS_CLUSTER: { path: ['cache', 'redis', 'cluster'], kind: 'boolean' },
  COMPACTOR_SEAL_KEY: { path: ['compaction', 'seal_key'] },
};

/** Every environment variable compactor reads: `--help` lists each one (test/config/help.test.ts derives it from here). */
export const ENVIRONMENT_VARIABLES: readonly string[] = ['COMPACTOR_CONFIG', ...Object.keys(ENVIRONMENT_OVERRIDES)];

/** The same keys by command-line flag, secrets excepted. */
const FLAG_OVERRIDES: Readonly<Record<string, Override>> = {
  host: { path: ['listen', 'host'] },
  port: { path: ['listen', 'port'], kind: 'integer' },
  upstream: { path: ['upstream', 'url'], kind: 'text or list' },
  'context-window': { path: ['models', '*', 'context_window'], kind: 'integer' },
  compaction: { path: ['compaction', 'enabled'], kind: 'boolean' },
  'max-messages': { path: ['compaction', 'max_messages'], kind: 'integer' },
  'summary-model': { path: ['compaction', 'summary', 'model'] },
  'summary-upstream': { path: ['compaction', 'summary', 'upstream'] },
  'summary-prompt-file': { path: ['compaction', 'summary', 'prompt_file'] },
  pairs: { path: ['pairs'] },
  'log-level': { path: ['log', 'level'] },
  'log-format': { path: ['log', 'format'] },
};

export interface LoadConfigOptions {
  /** Command-line arguments, without the node binary and script. */
  readonly argv?: readonly string[];
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Reads the configuration file; tests replace it. */
  readonly readFile?: (path: string) => string;
}

export type LoadConfigResult =
  | {
      readonly ok: true;
      readonly config: Config;
      readonly file: string | null;
      readonly help: boolean;
      readonly version: boolean;
      readonly printConfig: boolean;
      /** What was taken differently from how it was written, for a warning at start. */
      readonly notices: readonly string[];
    }
  | { readonly ok: false; readonly errors: string[] };

type RawDocument = Record<string, unknown>;

function isMapping(value: unknown): value is RawDocument {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function setPath(document: RawDocument, path: readonly string[], value: unknown): void {
  let node = document;
  for (const key of path.slice(0, -1)) {
    const child = node[key];
    if (isMapping(child)) {
      node = child;
    } else {
      // A scalar where a section belongs is replaced; its own error would be hidden by the override anyway.
      const section: RawDocument = {};
      node[key] = section;
      node = section;
    }
  }
  node[path[path.length - 1]!] = value;
}

/**
 * Text as the value the key expects, when it reads as one (a port becomes a
 * number, `off` becomes false); otherwise the text itself, which the schema
 * then reports at its path.
 */
function overrideValue(override: Override, text: string): unknown {
  switch (override.kind) {
    case 'integer':
      return /^\d+$/.test(text) ? Number(text) : text;
    case 'boolean':
      if (/^(true|on|yes|1)$/i.test(text)) return true;
      if (/^(false|off|no|0)$/i.test(text)) return false;
      return text;
    case 'text or list':
      return text.includes(',') ? overrideValue({ ...override, kind: 'list' }, text) : text;
    case 'list':
      return text.split(',').map((item) => item.trim()).filter((item) => item !== '');
    default:
      return text;
  }
}

function readDocument(file: string, readFile: (path: string) => string): { document: RawDocument } | { errors: string[] } {
  let text: string;
  try {
    text = readFile(file);
  } catch (error) {
    const code = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    return { errors: [`cannot read the config file ${file} (${code})`] };
  }
  const document = parseDocument(text, { prettyErrors: true });
  if (document.errors.length > 0) {
    return { errors: document.errors.map((error) => `${file}: ${error.message}`) };
  }
  const value: unknown = document.toJS();
  if (value === null || value === undefined) return { document: {} };
  if (!isMapping(value)) return { errors: [`${file}: expected a mapping of configuration keys at the top level`] };
  return { document: value };
}

/**
 * Reads the configuration from flags, environment and file, and validates it.
 *
 * @example
 * loadConfig({ argv: ['--port', '9000'], env: {} })
 * // → { ok: true, config: { listen: { host: '127.0.0.1', port: 9000 }, … }, file: null, help: false, version: false, printConfig: false, notices: [] }
 */
export function loadConfig(options: LoadConfigOptions = {}): LoadConfigResult {
  const { argv = [], env = {}, readFile = (path: string) => readFileSync(path, 'utf8') } = options;

  const parsed = parseFlags(argv);
  if (!parsed.ok) return { ok: false, errors: parsed.errors };
  const flags = parsed.values;
  const help = flags['help'] === true;
  const version = flags['version'] === true;
  const printConfig = flags['print-config'] === true;
  const flagFile = flags['config'];
  const file = typeof flagFile === 'string' ? flagFile : env['COMPACTOR_CONFIG'] || null;

  let document: RawDocument = {};
  if (file !== null) {
    const read = readDocument(file, readFile);
    if ('errors' in read) return { ok: false, errors: read.errors };
    document = read.document;
  }

  const unknownVariables = unknownEnvironmentVariables(env, ENVIRONMENT_VARIABLES);
  if (unknownVariables.length > 0) return { ok: false, errors: unknownVariables };

  const sources = applyOverrides(document, env, flags);

  const result = parseConfig(document);
  if (result.ok) {
    const { config, notices } = withoutApiSuffix(result.config);
    return { ok: true, config, file, help, version, printConfig, notices };
  }
  const errors = result.errors.map((error) => {
    const path = error.slice(0, error.indexOf(':'));
    const source = sources.get(path);
    if (source !== undefined) return `${error} (from ${source})`;
    return file === null ? error : `${file}: ${error}`;
  });
  return { ok: false, errors };
}

/**
 * The configuration as YAML, as `--print-config` shows it: every key with
 * the value in force, keys and passwords masked, so it can be pasted into an
 * issue or a file.
 *
 * @example
 * printableConfig(defaultConfig()) // → 'listen:\n  host: 127.0.0.1\n  port: 8081\n…'
 */
export function printableConfig(config: Config): string {
  const masked: Config = {
    ...config,
    upstream: {
      ...config.upstream,
      url: maskUrl(config.upstream.url)!,
      api_key: config.upstream.api_key === null ? null : MASK,
      servers: config.upstream.servers.map((server) => ({ ...server, url: maskUrl(server.url)!, api_key: server.api_key === null ? null : MASK })),
    },
    compaction: {
      ...config.compaction,
      summary: {
        ...config.compaction.summary,
        upstream: maskUrl(config.compaction.summary.upstream),
        api_key: config.compaction.summary.api_key === null ? null : MASK,
      },
      seal_key: config.compaction.seal_key === null ? null : MASK,
    },
    auth: { keys: config.auth.keys.map(() => MASK), admin_keys: config.auth.admin_keys.map(() => MASK) },
    cache: { ...config.cache, redis: { ...config.cache.redis, url: maskUrls(config.cache.redis.url), secret: config.cache.redis.secret === null ? null : MASK, key_salt: config.cache.redis.key_salt === null ? null : MASK } },
  };
  return stringify(masked);
}

/** The command line's flags, or why they cannot be read (with the usage). */
function parseFlags(argv: readonly string[]): { ok: true; values: Record<string, string | boolean | undefined> } | { ok: false; errors: string[] } {
  try {
    const { values } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string' },
        ...Object.fromEntries(Object.keys(FLAG_OVERRIDES).map((name) => [name, { type: 'string' as const }])),
        'print-config': { type: 'boolean' },
        observe: { type: 'boolean' },
        version: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    });
    return { ok: true, values };
  } catch (error) {
    return { ok: false, errors: [error instanceof Error ? error.message : String(error), USAGE] };
  }
}

/** Sets the environment's and the flags' values into the document (flags win); returns where each path's value came from, for the errors. */
function applyOverrides(document: RawDocument, env: Readonly<Record<string, string | undefined>>, flags: Readonly<Record<string, string | boolean | undefined>>): Map<string, string> {
  const sources = new Map<string, string>();
  for (const [name, override] of Object.entries(ENVIRONMENT_OVERRIDES)) {
    const text = env[name];
    if (text === undefined || text === '') continue;
    setPath(document, override.path, overrideValue(override, text));
    sources.set(formatPath(override.path), name);
  }
  for (const [name, override] of Object.entries(FLAG_OVERRIDES)) {
    const text = flags[name];
    if (typeof text !== 'string') continue;
    setPath(document, override.path, overrideValue(override, text));
    sources.set(formatPath(override.path), `--${name}`);
  }

  // A switch, not a value: `--observe` is `compaction.mode: observe`.
  if (flags['observe'] === true) {
    setPath(document, ['compaction', 'mode'], 'observe');
    sources.set('compaction.mode', '--observe');
  }
  return sources;
}
