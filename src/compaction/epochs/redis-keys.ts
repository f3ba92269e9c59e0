import { createHmac } from 'node:crypto';

/**
 * The names of every key the Redis store writes, in one place.
 *
 * One server: `<prefix>epoch:<prefix hash>`, `<prefix>lease:<prefix hash>`,
 * `<prefix>backoff:<conversation>`, `<prefix>ratio:<keyed tenant> NUL <model>`.
 *
 * Redis Cluster: a script may only touch keys of one hash slot, and a lookup
 * reads every epoch key of a history. So the keys of one conversation carry
 * its name as a hash tag (`<prefix>{<conversation>}epoch:…`, `…lease:…`,
 * `<prefix>{<conversation>}backoff`), which puts them on one node, and
 * different conversations spread over the cluster. A ratio belongs to a
 * tenant's model, not to one conversation: its key has no tag.
 *
 * A conversation is named by the prefix hash of its head and first user
 * message (repository.ts `conversationOf`): the same for every request of it,
 * whatever its length.
 *
 * The tenant in a ratio's name is never the tenant id itself (a digest of the
 * credential, the same in every deployment): it is an HMAC of it keyed by the
 * deployment's salt (issue 34 item 4), so whoever reads the key names can
 * neither test a credential against them nor match one tenant across two
 * deployments. The salt is `cache.redis.key_salt`, else derived from
 * `cache.redis.secret`; with neither the digest is keyed by nothing and only
 * hides the id (README § Replicas).
 */
export class RedisKeys {
  readonly #salt: string;

  constructor(
    readonly prefix: string,
    readonly cluster: boolean,
    salt = '',
  ) {
    this.#salt = salt;
  }

  epoch(conversation: string, hash: string): string {
    return `${this.#scope(conversation)}epoch:${hash}`;
  }

  lease(conversation: string, hash: string): string {
    return `${this.#scope(conversation)}lease:${hash}`;
  }

  backoff(conversation: string): string {
    return this.cluster ? `${this.#scope(conversation)}backoff` : `${this.prefix}backoff:${conversation}`;
  }

  /** A tenant is a digest or ''; NUL never occurs in one, so no two pairs share a key. */
  ratio(tenant: string, model: string): string {
    return `${this.prefix}ratio:${this.#keyed(tenant)}\u0000${model}`;
  }

  #keyed(tenant: string): string {
    return createHmac('sha256', this.#salt).update('compactor-tenant\0').update(tenant).digest('base64url').slice(0, 22);
  }

  #scope(conversation: string): string {
    return this.cluster ? `${this.prefix}{${conversation}}` : this.prefix;
  }
}

/** The deployment's salt for the tenants in key names: `cache.redis.key_salt`, else one derived from `cache.redis.secret`, else none. */
export function keySaltOf(secret: string | null, keySalt: string | null): string {
  if (keySalt !== null) return keySalt;
  return secret === null ? '' : createHmac('sha256', secret).update('compactor key names').digest('base64url');
}
