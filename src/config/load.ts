import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseDocument } from 'yaml';
import { type Config, formatPath, parseConfig } from './schema.js';

/**
 * Where the configuration comes from, lowest precedence first: the defaults,
 * the YAML file (`--config`, else `COMPACTOR_CONFIG`), `COMPACTOR_*`
 * environment variables, command-line flags. Overrides are applied to the raw
 * document before validation, so a bad value is reported at its path (and
 * with its source) like any other.
 */

export const USAGE = `Usage: compactor [options]

Options:
  --config FILE      YAML configuration file (env COMPACTOR_CONFIG)
  --host HOST        listen address (env COMPACTOR_HOST, default 127.0.0.1)
  --port PORT        listen port (env COMPACTOR_PORT, default 8081)
  --upstream URL     upstream server (env COMPACTOR_UPSTREAM_URL, default http://127.0.0.1:8080)
  --log-level LEVEL  fatal | error | warn | info | debug | trace | silent (env COMPACTOR_LOG_LEVEL)
  -h, --help         print this help

Also read from the environment: COMPACTOR_UPSTREAM_API_KEY (upstream.api_key).`;

interface Override {
  readonly path: readonly string[];
  readonly numeric?: boolean;
}

/** Environment variables and the configuration key each one sets. */
const ENVIRONMENT_OVERRIDES: Readonly<Record<string, Override>> = {
  COMPACTOR_HOST: { path: ['listen', 'host'] },
  COMPACTOR_PORT: { path: ['listen', 'port'], numeric: true },
  COMPACTOR_UPSTREAM_URL: { path: ['upstream', 'url'] },
  COMPACTOR_UPSTREAM_API_KEY: { path: ['upstream', 'api_key'] },
  COMPACTOR_LOG_LEVEL: { path: ['log', 'level'] },
};

/** Command-line flags and the configuration key each one sets. */
const FLAG_OVERRIDES: Readonly<Record<string, Override>> = {
  host: { path: ['listen', 'host'] },
  port: { path: ['listen', 'port'], numeric: true },
  upstream: { path: ['upstream', 'url'] },
  'log-level': { path: ['log', 'level'] },
};

export interface LoadConfigOptions {
  /** Command-line arguments, without the node binary and script. */
  readonly argv?: readonly string[];
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Reads the configuration file; tests replace it. */
  readonly readFile?: (path: string) => string;
}

export type LoadConfigResult =
  | { readonly ok: true; readonly config: Config; readonly file: string | null; readonly help: boolean }
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

/** A port given as text becomes a number when it is one; otherwise the schema reports it. */
function overrideValue(override: Override, text: string): unknown {
  return override.numeric === true && /^\d+$/.test(text) ? Number(text) : text;
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
 * // → { ok: true, config: { listen: { host: '127.0.0.1', port: 9000 }, … }, file: null, help: false }
 */
export function loadConfig(options: LoadConfigOptions = {}): LoadConfigResult {
  const { argv = [], env = {}, readFile = (path: string) => readFileSync(path, 'utf8') } = options;

  let flags: Record<string, string | boolean | undefined>;
  try {
    flags = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string' },
        host: { type: 'string' },
        port: { type: 'string' },
        upstream: { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    return { ok: false, errors: [error instanceof Error ? error.message : String(error), USAGE] };
  }

  const help = flags['help'] === true;
  const flagFile = flags['config'];
  const file = typeof flagFile === 'string' ? flagFile : env['COMPACTOR_CONFIG'] || null;

  let document: RawDocument = {};
  if (file !== null) {
    const read = readDocument(file, readFile);
    if ('errors' in read) return { ok: false, errors: read.errors };
    document = read.document;
  }

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

  const result = parseConfig(document);
  if (result.ok) return { ok: true, config: result.config, file, help };
  const errors = result.errors.map((error) => {
    const path = error.slice(0, error.indexOf(':'));
    const source = sources.get(path);
    if (source !== undefined) return `${error} (from ${source})`;
    return file === null ? error : `${file}: ${error}`;
  });
  return { ok: false, errors };
}
