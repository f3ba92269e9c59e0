import type { UpstreamClient } from '../upstream/client.js';
import type { SlotRouter } from '../slots/slot-router.js';
import type { ServerConfig } from '../config/schema.js';
import { maskUrl } from '../config/mask.js';

/**
 * One server of a fleet (issue 39): its own upstream client (pool, key), its
 * own slot router (home slots, one request per slot), whether it answers,
 * the models it serves and its counters for `/metrics`.
 */

export interface ServerCounters {
  /** Requests sent to it (turns and summaries). */
  requests: number;
  /** Requests that failed on it before an answer began (sent again elsewhere when another server was left). */
  failures: number;
  /** Times it was taken out (a failed request or probe) and brought back. */
  takenOut: number;
  broughtBack: number;
}

export class FleetServer {
  readonly index: number;
  readonly url: string;
  /** The URL as logs and metrics show it: its password masked. */
  readonly label: string;
  readonly weight: number;
  readonly client: UpstreamClient;
  readonly slots: SlotRouter | undefined;
  readonly counters: ServerCounters = { requests: 0, failures: 0, takenOut: 0, broughtBack: 0 };
  /** Answers /health (and requests); a server that stops is taken out until it answers again. */
  healthy = true;
  /** The models it serves: configured, else discovered (`/v1/models`), else null (any). */
  models: ReadonlySet<string> | null;
  readonly modelsConfigured: boolean;

  constructor(index: number, config: ServerConfig, client: UpstreamClient, slots: SlotRouter | undefined) {
    this.index = index;
    this.url = config.url;
    this.label = maskUrl(config.url)!;
    this.weight = config.weight;
    this.client = client;
    this.slots = slots;
    this.models = config.models === null ? null : new Set(config.models);
    this.modelsConfigured = config.models !== null;
  }

  /** Whether it is known to serve `model`: null while its models are not known (any). */
  serves(model: string): boolean | null {
    return this.models === null ? null : this.models.has(model);
  }

  /**
   * Slots no conversation calls home and nothing runs in, over every model it
   * schedules: a new conversation there evicts nobody. Null while not known
   * (no slot scheduling, or its slots not found yet: they are asked for at
   * its first request).
   */
  get freeSlots(): number | null {
    const found = this.slots?.stats() ?? [];
    if (found.length === 0) return null;
    let free = 0;
    for (const { stats } of found) for (const slot of stats.slots) if (slot.owner === null && !slot.inFlight) free++;
    return free;
  }

  /** Slots with a request in them now. */
  get slotsInUse(): number {
    let busy = 0;
    for (const { stats } of this.slots?.stats() ?? []) for (const slot of stats.slots) if (slot.inFlight) busy++;
    return busy;
  }

  /** Requests queued or in flight on it now (its pool's). */
  get queued(): number {
    return this.client.activeRequests;
  }
}
