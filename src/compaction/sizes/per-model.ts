import { LRUCache } from 'lru-cache';

/**
 * State kept per model name, which comes from request text: at most
 * {@link MODELS_REMEMBERED} names, the least recently used (read or written)
 * forgotten first.
 */

/**
 * How many models per-model state remembers. A proxy in front of
 * llama-server sees one model, or a handful; a client inventing names then
 * costs 256 entries (names are at most 256 characters: ~64 KB), where each
 * new name was kept for good (30,000 names made /readyz a 123 MB body).
 */
export const MODELS_REMEMBERED = 256;

/** A map of model name → value holding {@link MODELS_REMEMBERED} names at most. */
export function perModel<V extends {}>(): LRUCache<string, V> {
  return new LRUCache<string, V>({ max: MODELS_REMEMBERED });
}
