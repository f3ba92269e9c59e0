import type { Config } from '../config/schema.js';
import type { UpstreamInspection } from '../upstream/inspect.js';

/**
 * `compactor doctor` is a list of checks, each printing one line. A check is
 * a name and an async function of what the doctor has gathered (the
 * configuration, the upstream's answers) to a finding; a new check (slot
 * scheduling, another store) is one more entry in `checks.ts`.
 */

/**
 * ok: as it should be. warn: works, less well than it could (said, does not
 * change the exit code). fail: something to fix (exit 1). skip: cannot be
 * told, because an earlier check failed.
 */
export type Verdict = 'ok' | 'warn' | 'fail' | 'skip';

export interface Finding {
  readonly verdict: Verdict;
  /** The line, without the check's name. */
  readonly text: string;
  /** For a fail: what to do about it, printed as the first thing to fix. */
  readonly fix?: string;
}

/** A model the upstream serves, with the window compactor will plan with. */
export interface PlannedModel {
  readonly id: string;
  /** Tokens per slot: the configured `context_window`, else what the upstream reports; null when neither. */
  readonly window: number | null;
  /** Where `window` comes from. */
  readonly source: 'configured' | 'upstream' | 'unknown';
  /** What the server says it runs the model with, and where it says so (`/api/ps context_length`). */
  readonly reported: number | null;
  readonly reportedSource: string;
  /** The configuration key that sets the window (`models."*".context_window`), when one does. */
  readonly configuredKey: string | null;
}

/** What the checks read, each asked of the upstream at most once however many checks need it. */
export interface DoctorContext {
  readonly config: Config;
  /** The configuration file read, or null for defaults and variables only. */
  readonly file: string | null;
  /** /health, /props and /v1/models, as the proxy asks them at start. */
  inspection(): Promise<UpstreamInspection>;
  /** The served models with their windows; empty when the upstream is not ready. */
  models(): Promise<readonly PlannedModel[]>;
  /** A JSON GET of the upstream whose error statuses come back as replies. */
  get(path: string): Promise<{ readonly status: number; readonly body: unknown }>;
  /** A JSON call to the upstream whose error statuses come back as replies. */
  post(path: string, body: unknown, timeoutMs?: number): Promise<{ readonly status: number; readonly body: unknown }>;
  /** A non-streamed chat completion (a tiny one), or the error it failed with. */
  chat(body: Readonly<Record<string, unknown>>): Promise<{ readonly ok: true; readonly body: unknown } | { readonly ok: false; readonly error: string }>;
  /** The epoch store's answer: for Redis, its PING and version. */
  store(): Promise<StoreAnswer>;
  /** Milliseconds, for the chat request's time (tests give a fixed clock). */
  now(): number;
}

export type StoreAnswer =
  | { readonly kind: 'memory' }
  | { readonly kind: 'redis'; readonly url: string; readonly version: string; readonly server: 'Redis' | 'Valkey' }
  | { readonly kind: 'redis unreachable'; readonly url: string; readonly reason: string };

export interface Check {
  /** A short word, printed before the line. */
  readonly name: string;
  run(context: DoctorContext): Promise<Finding>;
}

export const ok = (text: string): Finding => ({ verdict: 'ok', text });
export const warn = (text: string): Finding => ({ verdict: 'warn', text });
export const fail = (text: string, fix: string): Finding => ({ verdict: 'fail', text, fix });
export const skip = (text: string): Finding => ({ verdict: 'skip', text });
