import { z } from 'zod';
import { describeType, formatPath } from '../issue-words.js';
import { closestByLetters, editDistance } from './unknown-variables.js';
import { DEFAULT_READ_TOOLS } from '../transcript/compress/calls.js';

/**
 * The configuration: every key of DESIGN.md § Configuration, each with its
 * default, so an empty file (or none) is a complete configuration.
 *
 * Objects are strict: an unknown key is an error, because a typo
 * (`treshold: 0.7`) would otherwise be silently ignored and the default used.
 * Nested objects use `prefault({})` so a missing section is parsed from `{}`
 * and gets the defaults of its keys.
 */

const Fraction = z.number().gt(0, 'expected a fraction above 0').lte(1, 'expected a fraction at most 1');
/** A share that may be 0 (off). */
const Share = z.number().gte(0, 'expected a fraction from 0').lte(1, 'expected a fraction at most 1');
const Milliseconds = z.int('expected an integer number of milliseconds').positive('expected a positive number');
const PositiveInteger = z.int('expected an integer').positive('expected a positive integer');
const NonNegativeInteger = z.int('expected an integer').nonnegative('expected an integer ≥ 0');
// `127.0.0.1:8080` is the likeliest mistake: say what to write instead.
const HttpUrl = z.url({ protocol: /^https?$/, error: (issue) => (typeof issue.input === 'string' && /^[\w.-]+:\d+(\/\S*)?$/.test(issue.input) ? `expected a URL; add its scheme: http://${issue.input}` : 'expected a URL') });
const RedisUrl = z.url({ protocol: /^rediss?$/, error: 'expected a redis:// or rediss:// URL' });
// `__proto__` as a map key would set the prototype of the parsed record.
const MapKey = z.string().refine((key) => key !== '__proto__' && key !== 'constructor', 'not allowed as a key');

const AUTO_OR_POSITIVE = 'expected "auto" or a positive integer';

/**
 * The room kept for the answer unless the request asks for more with its own
 * `max_tokens`: a coding agent's usual answer (a tool call, an edit, a short
 * reply) fits in it, and it costs an 8k window an eighth. It is capped at a
 * quarter of the window like the request's own (compaction/policy/budget.ts).
 */
export const DEFAULT_RESERVE_OUTPUT_TOKENS = 1024;

const ModelSchema = z.strictObject({
  context_window: z
    .union([z.literal('auto'), z.int(AUTO_OR_POSITIVE).positive(AUTO_OR_POSITIVE)], { error: AUTO_OR_POSITIVE })
    .default('auto'),
  reserve_output_tokens: NonNegativeInteger.default(DEFAULT_RESERVE_OUTPUT_TOKENS),
});
export type ModelConfig = z.infer<typeof ModelSchema>;

const DEFAULT_MODEL: ModelConfig = { context_window: 'auto', reserve_output_tokens: DEFAULT_RESERVE_OUTPUT_TOKENS };

/** The settings of `model`: its own entry of `models`, else `models["*"]`, else the defaults (an own entry only: a model named `constructor` is not Object's). */
export function modelSettingsOf(models: Readonly<Record<string, ModelConfig>>, model: string): ModelConfig {
  return (Object.hasOwn(models, model) ? models[model] : undefined) ?? models['*'] ?? DEFAULT_MODEL;
}

/** One server of a fleet (upstream.servers, issue 39). */
const ServerSchema = z.strictObject({
  url: HttpUrl,
  /** Sent to this server as `Authorization: Bearer …`; null: upstream.api_key (null too: the client's own). */
  api_key: z.string().min(1, 'expected a non-empty string or null').nullable().default(null),
  /** Its share of new conversations against the others' (a bigger GPU takes more): 2 takes twice what 1 does. */
  weight: z.number('expected a number').positive('expected a positive number').default(1),
  /** The models it serves; null: found by asking it (`/v1/models`), and any model until it answered. */
  models: z.array(z.string().min(1, 'expected a model name')).min(1, 'expected at least one model, or null').nullable().default(null),
});
export type ServerConfig = z.infer<typeof ServerSchema>;

const DEFAULT_UPSTREAM_URL = 'http://127.0.0.1:8080';

/** The servers in force: `servers` when given, else one per URL of `url` (the default server when neither is). */
function serversOf(url: string | readonly string[] | undefined, servers: readonly ServerConfig[] | undefined): ServerConfig[] {
  if (servers !== undefined) return [...servers];
  const urls = url === undefined ? [DEFAULT_UPSTREAM_URL] : typeof url === 'string' ? [url] : url;
  return urls.map((each) => ({ url: each, api_key: null, weight: 1, models: null }));
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** `json` for machines (log collectors), `pretty` for a person at a terminal. */
const LOG_FORMATS = ['json', 'pretty'] as const;

export const ConfigSchema = z
  .strictObject({
    listen: z
      .strictObject({
        host: z.string().min(1, 'expected a host name or address').default('127.0.0.1'),
        port: z.int('expected a port number').min(0, 'expected a port number').max(65535, 'expected a port number').default(8081),
      })
      .prefault({}),
    upstream: z
      .strictObject({
        /** One server's URL; a list of them (COMPACTOR_UPSTREAM_URL=a,b) is a fleet, as `servers` with each server's defaults. */
        url: z.union([HttpUrl, z.array(HttpUrl).min(1, 'expected at least one URL')], { error: 'expected a URL, or a list of them' }).optional(),
        /** A fleet of servers (issue 39): each conversation has a home server, chosen once, kept while it is healthy. */
        servers: z.array(ServerSchema).min(1, 'expected at least one server').optional(),
        api_key: z.string().min(1, 'expected a non-empty string or null').nullable().default(null),
        /** How often each server of a fleet is asked `/health`: a server that stops answering is taken out, one that answers again comes back. */
        health_interval_ms: Milliseconds.default(5_000),
        timeouts: z
          .strictObject({
            connect_ms: Milliseconds.default(5_000),
            // Local models can take minutes to read a long prompt before the first byte.
            headers_ms: Milliseconds.default(600_000),
            idle_ms: Milliseconds.default(300_000),
          })
          .prefault({}),
        /**
         * auto (the default): a conversation gets its own llama-server slot when the server reports two slots or more (/props
         * total_slots; one slot is left alone unless slot_save); off: llama-server picks. On by default since issue 33: on a real
         * llama-server (before a turn's wait was bounded by its re-read) it read 39% fewer prompt tokens than llama-server alone on 4 slots, 16% fewer on 2 (bench/README.md § slots.ts).
         */
        slots: z.enum(['auto', 'off']).default('auto'),
        // About what re-reading a long prompt costs on a GPU: waiting longer than that for a busy slot loses more than a re-read.
        slot_wait_ms: Milliseconds.default(5_000),
        /** The user started llama-server with --slot-save-path: evicted conversations are saved to a file and restored. */
        slot_save: z.boolean('expected true or false').default(false),
        // 10 GiB: ~10 conversations of 16k tokens of a 7B model (~57 KB per token).
        slot_save_max_bytes: PositiveInteger.default(10 * 1024 ** 3),
        /** A fleet's servers share one --slot-save-path (a shared disk) and one model: a conversation that moves restores its saved slot on its new server. */
        slot_save_shared: z.boolean('expected true or false').default(false),
      })
      .superRefine((upstream, context) => {
        // Both given: `url` must be one of the servers (a printed configuration has both, and reads back alike).
        const urls = typeof upstream.url === 'string' ? [upstream.url] : (upstream.url ?? []);
        if (upstream.servers !== undefined && urls.some((url) => !upstream.servers!.some((server) => server.url === url))) {
          context.addIssue({ code: 'custom', path: ['url'], message: 'set upstream.url or upstream.servers, not both (or name in url only servers of the list)' });
        }
      })
      .transform(({ url, servers, ...rest }) => {
        const fleet = serversOf(url, servers);
        // `url` stays the first server's: what one server did with it (the ledger, the doctor, the start line) still reads it.
        return { ...rest, url: fleet[0]!.url, servers: fleet };
      })
      .prefault({}),
    models: z
      .record(MapKey, ModelSchema.prefault({}))
      .prefault({})
      // "*" applies to every model without its own entry, so it always exists.
      .transform((models): Record<string, ModelConfig> => ('*' in models ? models : { ...models, '*': DEFAULT_MODEL })),
    compaction: z
      .strictObject({
        enabled: z.boolean('expected true or false').default(true),
        /** compact: rewrite what must be; observe: forward every request as the client sent it and only report what would have been done. */
        mode: z.enum(['compact', 'observe']).default('compact'),
        /**
         * What a request's `x-compactor-mode: off | observe | compact` may do (issue 34 item 3): `lower` (the default)
         * only lower the operator's mode (compact → observe → off), `raise` choose any mode, `never` nothing.
         * `true` (the old default) is `lower`: the header is still honoured, but a client can no longer lift an
         * operator's observe into summary calls; `false` is `never`, as it was.
         */
        allow_request_mode: z
          .union([z.boolean(), z.enum(['lower', 'raise', 'never'])], 'expected lower, raise or never (true is lower, false is never)')
          .default('lower')
          .transform((value) => (value === true ? 'lower' : value === false ? 'never' : value)),
        threshold: Fraction.default(0.85),
        soft_threshold: Fraction.default(0.6),
        target: Fraction.default(0.5),
        keep_recent: Fraction.default(0.25),
        /** The working set (issue 32): the newest copy of each file read, newest first, kept raw through every tier up to this share of the budget; 0: off. */
        working_set: Share.default(0.25),
        /**
         * The working set's room is never less than this many tokens, nor more than half the budget: a small window's
         * quarter holds one file of three, a large window's half carries so much that every turn summarizes.
         */
        working_set_min_tokens: NonNegativeInteger.default(1536),
        max_messages: NonNegativeInteger.default(0),
        /** Soft-zone choices (compress now, at the crossing, or prepare a summary) by the server seconds each costs, once the upstream's speeds are learned (issue 36); false: by tokens alone. */
        decide_by_cost: z.boolean('expected true or false').default(true),
        prune: z.strictObject({ max_result_chars: PositiveInteger.default(8192) }).prefault({}),
        /** The compression tier (issue 25): old tool results compressed model-free before any summary; defaults measured by bench/compress.ts. */
        compress: z
          .strictObject({
            enabled: z.boolean('expected true or false').default(true),
            /** Tokens a compression must free to be applied: fewer, and the prefix change costs more KV cache than it saves. */
            clear_at_least: NonNegativeInteger.default(2048),
            superseded: z.boolean('expected true or false').default(true),
            identical: z.boolean('expected true or false').default(true),
            structure: z.boolean('expected true or false').default(true),
            min_result_chars: NonNegativeInteger.default(400),
            keep_items: NonNegativeInteger.default(3),
            keep_lines: NonNegativeInteger.default(5),
            /** Tools whose results are file reads (never trimmed by structure), besides calls whose arguments are a path. */
            read_tools: z.array(z.string().min(1)).default([...DEFAULT_READ_TOOLS]),
            /** Anthropic-style clearing: keep the newest `keep` results per tool (0: off), never those of `exclude_tools`. */
            clear: z
              .strictObject({ keep: NonNegativeInteger.default(0), exclude_tools: z.array(z.string().min(1)).default([]) })
              .prefault({}),
          })
          .prefault({}),
        summary: z
          .strictObject({
            model: z.string().min(1).nullable().default(null),
            upstream: HttpUrl.nullable().default(null),
            /** Sent to `upstream` (the summary server) when set; without it that server gets no credential at all. */
            api_key: z.string().min(1, 'expected a non-empty string or null').nullable().default(null),
            max_tokens: PositiveInteger.default(1024),
            timeout_ms: Milliseconds.default(300_000),
            concurrency: PositiveInteger.default(1),
            /** Summaries one tenant may have waiting for a slot (issue 21): one tenant's flood never queues ahead of everyone. */
            max_queued_per_tenant: PositiveInteger.default(16),
            /** Background summaries waiting in all; past it the stalest is dropped. Each holds its request's messages. */
            max_queued_background: PositiveInteger.default(64),
            prompt_file: z.string().min(1).nullable().default(null),
          })
          .prefault({}),
        on_summary_failure: z.enum(['truncate', 'forward', 'error']).default('truncate'),
        /** A refusal naming a smaller window than this is not learned: a refusal naming 1 token made every request a 400. */
        min_learned_window: PositiveInteger.default(512),
        progress: z.boolean('expected true or false').default(true),
        /**
         * Keys the sealed `compaction` items `/v1/responses/compact` answers (AES-256-GCM): null takes
         * `cache.redis.secret`, and without one a random key per process (items then open only in the process that sealed them).
         */
        seal_key: z.string().min(16, 'expected at least 16 characters').nullable().default(null),
      })
      .prefault({}),
    pairs: z.enum(['repair', 'reject', 'off']).default('repair'),
    cache: z
      .strictObject({
        max_entries: NonNegativeInteger.default(10_000),
        // The epochs' memory, in bytes (about: their messages' JSON; a head many conversations share, once).
        max_bytes: PositiveInteger.default(128 * 1024 * 1024),
        ttl_s: PositiveInteger.default(86_400),
        /** memory: this process only; redis: shared by replicas (Redis ≥ 7 or Valkey). */
        store: z.enum(['memory', 'redis']).default('memory'),
        redis: z
          .strictObject({
            // One server's URL; with `cluster`, a seed node or a list of them (any one reachable is enough).
            url: z.union([RedisUrl, z.array(RedisUrl).min(1, 'expected at least one URL')], { error: 'expected a redis:// or rediss:// URL, or a list of them' }).nullable().default(null),
            /** A Redis Cluster (or Valkey cluster): `url` names seed nodes, and each conversation's keys share a hash tag. */
            cluster: z.boolean('expected true or false').default(false),
            key_prefix: z.string().default('compactor:'),
            // A store slower than this is treated as down for that call: the request goes on with the memory store.
            timeout_ms: Milliseconds.default(50),
            /** Signs every stored epoch (HMAC-SHA256): one that does not verify is a miss. Without it, whoever can write the keys is trusted. */
            secret: z.string().min(16, 'expected at least 16 characters').nullable().default(null),
            /** Keys the tenant digests in key names (HMAC), so they differ per deployment; null: derived from `secret`. */
            key_salt: z.string().min(16, 'expected at least 16 characters').nullable().default(null),
            /** A stored epoch larger than this once inflated is a miss: no epoch is larger than a request body. */
            max_value_bytes: PositiveInteger.default(33_554_432),
          })
          .prefault({}),
      })
      .prefault({}),
    auth: z
      .strictObject({
        keys: z.array(z.string().min(1, 'expected a non-empty key')).default([]),
        /** Keys that also see every tenant's conversations on the dashboard; each is accepted like one of `keys`. */
        admin_keys: z.array(z.string().min(1, 'expected a non-empty key')).default([]),
      })
      .prefault({}),
    dashboard: z
      .strictObject({
        enabled: z.boolean('expected true or false').default(true),
        /** When true, an epoch's notes can be opened on the page; otherwise no message text ever leaves the process. */
        show_text: z.boolean('expected true or false').default(false),
        // What the page's state keeps, whatever the traffic: ~1 KiB per conversation (its last points), ~300 B per event.
        max_conversations: PositiveInteger.default(100),
        max_events: PositiveInteger.default(200),
      })
      .prefault({}),
    limits: z
      .strictObject({
        body_bytes: PositiveInteger.default(33_554_432),
        /** Messages, tool calls and content parts one request may carry: the planning work of a request is capped by it (413 past it). */
        max_items: PositiveInteger.default(50_000),
        /**
         * JSON values one body may hold, containers and scalars at any depth, counted by the scan before any parse (413 past
         * it; issue 34 item 2: 10 million empty objects beside the messages were never counted). 500,000 is twice what the
         * largest bodies `max_items` admits hold (the bench's 32 MiB shapes of 50,000 items: ~230,000 values each) and ~50x a
         * real agent request (tool schemas and a long history: a few thousand to ~10,000); parsing 500,000 empty objects
         * takes ~32 MiB of heap, against 640 MiB for the 10 million.
         */
        max_values: PositiveInteger.default(500_000),
        /**
         * The bytes of all large bodies (1 MiB or more) being read and planned at once; past it a newcomer waits its turn
         * (up to 10 s), then gets a 503. Small bodies never wait. 128 MiB: four bodies of `body_bytes` at once (issue 34: four
         * uncounted 28.6 MiB bodies took 3.8 GB, six no answer; with `max_values` a 32 MiB body parses to at most ~2-3x its bytes).
         */
        in_flight_bytes: PositiveInteger.default(134_217_728),
        /** Connections draining the rest of a body after its 413 at once; past it the 413 closes at once (each holds a descriptor). */
        max_draining: PositiveInteger.default(64),
        /** A drain slower than this (bytes per second, over 2 s windows) is closed: a trickle never holds a connection. */
        drain_min_bytes_per_s: PositiveInteger.default(32_768),
        /**
         * Client connections at once (each holds a descriptor, and one being answered another upstream), per client address;
         * past it the client holding the most pays (http/edge/connection-cap.ts). auto: half of the open-file limit, less 64.
         */
        max_connections: z.union([z.literal('auto'), z.int(AUTO_OR_POSITIVE).positive(AUTO_OR_POSITIVE)], { error: AUTO_OR_POSITIVE }).default('auto'),
      })
      .prefault({}),
    log: z.strictObject({ level: z.enum(LOG_LEVELS).default('info'), format: z.enum(LOG_FORMATS).default('json') }).prefault({}),
    memory: z
      .strictObject({
        /** After a load burst, once no request has started for 2 s, one full collection gives back the heap the burst grew (idle streams never let V8 do it). */
        reduce_when_idle: z.boolean('expected true or false').default(true),
      })
      .prefault({}),
  })
  .superRefine((config, context) => {
    if (config.cache.store === 'redis' && config.cache.redis.url === null) {
      context.addIssue({ code: 'custom', path: ['cache', 'redis', 'url'], message: 'required when cache.store is redis' });
    }
    const { url, cluster, key_prefix: keyPrefix } = config.cache.redis;
    if (!cluster && Array.isArray(url) && url.length > 1) {
      context.addIssue({ code: 'custom', path: ['cache', 'redis', 'url'], message: 'a list of seed nodes needs cache.redis.cluster: true (one server takes one URL)' });
    }
    // Redis hashes the first {…} of a key: one in the prefix would put every conversation on one node.
    if (cluster && /[{}]/.test(keyPrefix)) {
      context.addIssue({ code: 'custom', path: ['cache', 'redis', 'key_prefix'], message: 'must not contain { or } with cache.redis.cluster (they make the hash tag)' });
    }
    const { threshold, soft_threshold: softThreshold, target, keep_recent: keepRecent } = config.compaction;
    // A target at or above the threshold would compact into another compaction.
    if (target >= threshold) {
      context.addIssue({ code: 'custom', path: ['compaction', 'target'], message: `must be below compaction.threshold (${threshold})` });
    }
    if (softThreshold > threshold) {
      context.addIssue({
        code: 'custom',
        path: ['compaction', 'soft_threshold'],
        message: `must not be above compaction.threshold (${threshold})`,
      });
    }
    // The raw recent part is kept inside the target, so it cannot be larger.
    if (keepRecent > target) {
      context.addIssue({ code: 'custom', path: ['compaction', 'keep_recent'], message: `must not be above compaction.target (${target})` });
    }
  });

export type Config = z.infer<typeof ConfigSchema>;

export type ParseConfigResult = { readonly ok: true; readonly config: Config } | { readonly ok: false; readonly errors: string[] };

/** Short messages in the words of a YAML file, for the issues that carry no message of their own. */
function messageOf(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${describeType(issue.expected, 'yaml')}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((value) => String(value)).join(', ')}`;
    case 'invalid_format':
      return issue.format === 'url' ? 'expected a URL' : `expected ${issue.format}`;
    case 'too_small':
      return `expected ${issue.inclusive === false ? 'above' : 'at least'} ${String(issue.minimum)}`;
    case 'too_big':
      return `expected ${issue.inclusive === false ? 'below' : 'at most'} ${String(issue.maximum)}`;
    default:
      return issue.message;
  }
}

/**
 * Validates a raw configuration (what the YAML file holds, with the
 * environment and flags applied) and fills in the defaults. Every problem is
 * listed as `path: what was expected`.
 *
 * @example
 * parseConfig({ upstream: { url: 'nope' } })
 * // → { ok: false, errors: ['upstream.url: expected a URL'] }
 */
export function parseConfig(raw: unknown): ParseConfigResult {
  const result = ConfigSchema.safeParse(raw ?? {});
  if (result.success) return { ok: true, config: result.data };
  const errors: string[] = [];
  for (const issue of result.error.issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) errors.push(`${formatPath([...issue.path, key])}: unknown key${suggestionFor(issue.path, key)}`);
      continue;
    }
    const message = issue.code === 'custom' || issue.message.startsWith('expected') || issue.message.startsWith('must') ? issue.message : messageOf(issue);
    errors.push(`${formatPath(issue.path)}: ${message}`);
  }
  return { ok: false, errors };
}

/**
 * ` (did you mean listen.port?)` for a key a letter or three from one the
 * section has, as a misspelled environment variable gets; nothing when none
 * is that close (a key from another program's configuration).
 */
function suggestionFor(path: readonly PropertyKey[], key: string): string {
  let section: unknown = defaultConfig();
  // Under `models` any name is a model: its keys are those of models."*".
  for (const step of path) section = (section as Record<string, unknown> | undefined)?.[path[0] === 'models' && step !== 'models' ? '*' : String(step)];
  if (typeof section !== 'object' || section === null || Array.isArray(section)) return '';
  const known = Object.keys(section);
  if (known.length === 0) return '';
  const closest = closestByLetters(key, known);
  return editDistance(key, closest) <= 3 ? ` (did you mean ${formatPath([...path, closest])}?)` : '';
}

/** The configuration with every default: what compactor runs with when given no file. */
export function defaultConfig(): Config {
  const result = ConfigSchema.safeParse({});
  if (!result.success) throw new Error('the default configuration does not validate');
  return result.data;
}
