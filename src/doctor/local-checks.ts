import { budgetOf } from '../compaction/policy/budget.js';
import { type Config, modelSettingsOf } from '../config/schema.js';
import { MASK, maskUrls } from '../config/mask.js';
import { type Check, type PlannedModel, fail, ok, skip, warn } from './check.js';

/**
 * The checks of compactor's own side: the epoch store, the mode, the keys,
 * and what a request as large as the window would meet.
 */

/** Redis commands compactor's store needs (SET … GET, Lua scripts of 7.0's semantics) arrived in Redis 7. */
const REDIS_MAJOR_NEEDED = 7;

const store: Check = {
  name: 'store',
  async run(context) {
    const answer = await context.store();
    switch (answer.kind) {
      case 'memory':
        return ok('memory: epochs live in this process (replicas would each summarize on their own: cache.store redis shares them)');
      case 'redis unreachable':
        return fail(`redis at ${answer.url} does not answer: ${answer.reason}`, `start Redis or Valkey at ${answer.url}, or set cache.redis.url (COMPACTOR_REDIS_URL) to where it runs`);
      case 'redis': {
        const major = Number(answer.version.split('.')[0]);
        const line = `redis at ${answer.url} answers: ${answer.server} ${answer.version}`;
        if (answer.server === 'Redis' && major < REDIS_MAJOR_NEEDED) return fail(line, `compactor's store needs Redis ${REDIS_MAJOR_NEEDED} or later, or Valkey`);
        return ok(line);
      }
    }
  },
};

const mode: Check = {
  name: 'mode',
  async run({ config }) {
    const pairs = `tool pairs: ${config.pairs}`;
    if (!config.compaction.enabled) return warn(`compaction off (compaction.enabled false): every request is forwarded as sent; ${pairs}`);
    if (config.compaction.mode === 'observe') return ok(`observe: every request is forwarded as sent, and what compaction would do is reported; ${pairs}`);
    return ok(`compact: requests near the window are pruned and summarized; ${pairs}`);
  },
};

function keyList(keys: readonly string[]): string {
  return keys.length === 0 ? 'none' : `${keys.length} (${keys.map(() => MASK).join(', ')})`;
}

const keys: Check = {
  name: 'keys',
  async run({ config }) {
    const parts = [
      `upstream.api_key ${config.upstream.api_key === null ? "none (clients' own keys pass through)" : MASK}`,
      `compaction.summary.api_key ${config.compaction.summary.api_key === null ? 'none' : MASK}`,
      `auth.keys ${keyList(config.auth.keys)}`,
      `auth.admin_keys ${keyList(config.auth.admin_keys)}`,
    ];
    const masked = maskUrls(config.cache.redis.url);
    const redis = masked === null || typeof masked === 'string' ? masked : masked.join(',');
    if (config.cache.store === 'redis' && redis !== null) {
      // Unsigned epochs are fine on a private Redis; a shared one should have the secret (docs/replicas.md).
      parts.push(`cache.redis.url ${redis}`, `cache.redis.secret ${config.cache.redis.secret === null ? 'none' : MASK}`);
    }
    const line = parts.join('; ');
    return config.listen.host !== '127.0.0.1' && config.listen.host !== 'localhost' && config.auth.keys.length === 0 && config.auth.admin_keys.length === 0
      ? warn(`${line}; listening on ${config.listen.host} with no auth.keys: anyone who reaches the port can use it`)
      : ok(line);
  },
};

/** What compactor does with a request whose prompt fills the window: where its threshold and target fall. */
export function windowPlan(config: Config, model: PlannedModel & { readonly window: number }): string {
  const reserve = modelSettingsOf(config.models, model.id).reserve_output_tokens;
  const budget = budgetOf(model.window, undefined, reserve, config.compaction.summary.max_tokens);
  const tokens = budget.tokens ?? 0;
  const { threshold, target } = config.compaction;
  const over = `a ${model.window}-token request to ${model.id} is over its threshold (${Math.round(threshold * 100)}% of a ${tokens}-token budget, ${budget.reserve.tokens} kept for the answer: ${Math.floor(threshold * tokens)} tokens)`;
  if (!config.compaction.enabled) return `${over}, but compaction is off: it is forwarded as sent, and the upstream refuses it`;
  if (config.compaction.mode === 'observe') return `${over}: observe mode forwards it as sent and reports that it would compact it`;
  return `${over}: compactor prunes old tool results and summarizes old turns down to about ${Math.floor(target * tokens)} tokens (${Math.round(target * 100)}%)`;
}

const window: Check = {
  name: 'window',
  async run(context) {
    const model = (await context.models()).find((served): served is PlannedModel & { window: number } => served.window !== null);
    if (model === undefined) return skip('no model with a known window to plan for');
    return ok(windowPlan(context.config, model));
  },
};

export const LOCAL_CHECKS: readonly Check[] = [store, mode, keys, window];
