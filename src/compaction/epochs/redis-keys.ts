/**
 * The names of every key the Redis store writes, in one place.
 *
 * One server: `<prefix>epoch:<prefix hash>`, `<prefix>lease:<prefix hash>`,
 * `<prefix>backoff:<conversation>`, `<prefix>ratio:<tenant NUL model>`.
 *
 * Redis Cluster: a script may only touch keys of one hash slot, and a lookup
 * reads every epoch key of a history with its back-off. So the keys of one
 * conversation carry its name as a hash tag (`<prefix>{<conversation>}epoch:…`,
 * `…lease:…`, `<prefix>{<conversation>}backoff`), which puts them on one
 * node, and different conversations spread over the cluster. A ratio belongs
 * to a tenant's model, not to one conversation: its key has no tag, and a
 * lookup reads it beside its script rather than in it.
 *
 * A conversation is named by the prefix hash of its head and first user
 * message (what the back-off already named it by): the same for every
 * request of it, whatever its length.
 */
export class RedisKeys {
  constructor(
    readonly prefix: string,
    readonly cluster: boolean,
  ) {}

  epoch(conversation: string, hash: string): string {
    return `${this.#scope(conversation)}epoch:${hash}`;
  }

  lease(conversation: string, hash: string): string {
    return `${this.#scope(conversation)}lease:${hash}`;
  }

  backoff(conversation: string): string {
    return this.cluster ? `${this.#scope(conversation)}backoff` : `${this.prefix}backoff:${conversation}`;
  }

  ratio(name: string): string {
    return `${this.prefix}ratio:${name}`;
  }

  /** Whether the lookup script can read the ratio too (one server: every key is on it). */
  get ratioInScript(): boolean {
    return !this.cluster;
  }

  #scope(conversation: string): string {
    return this.cluster ? `${this.prefix}{${conversation}}` : this.prefix;
  }
}
