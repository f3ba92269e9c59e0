import type { KnownPrefixes } from '../../compaction/epochs/known-prefixes.js';
import type { Config } from '../../config/schema.js';
import type { WireFormat } from '../../formats/registry.js';
import type { Upstream } from '../../upstream/client.js';
import type { ForwardRequestHeadersOptions } from '../edge/headers.js';
import type { BodyBudget } from '../edge/body-budget.js';
import type { Shutdown } from '../ops/shutdown.js';
import type { SlotRouter } from '../../slots/slot-router.js';
import type { Fleet } from '../../fleet/fleet.js';
import type { ChatHooks } from './planner.js';
import type { ReadSettings } from './read-request.js';
import type { NotesSeal } from './sealed-notes.js';

/**
 * What every exchange of one chat route shares: its options, and what
 * follows from them once (the header options, the wire format). Per request
 * there are only the values of the pipeline (exchange.ts) and its answer
 * writer (answer.ts).
 */

export interface ChatRouteOptions {
  readonly config: Config;
  readonly upstream: Upstream;
  readonly hooks: ChatHooks;
  /** Ends the requests still in flight, with the error to answer (shutdown). */
  readonly shutdown?: Shutdown;
  /** Told when a streamed (SSE) answer starts and when its connection closes (the active streams gauge). */
  readonly streams?: { opened(): void; closed(): void };
  /** Told when the upstream refuses a request as larger than its context (the metrics). */
  readonly onContextExceeded?: (model: string) => void;
  /** The API the route serves (src/formats/): how its bodies are read, its answers tapped, its errors worded. */
  readonly format: WireFormat;
  /** The llama-server slots, when scheduled (upstream.slots): a conversation's requests go to its home slot, one at a time. */
  readonly slots?: SlotRouter;
  /** A fleet of servers (upstream.servers, two or more): each conversation on its home server, with that server's slots; absent for one server. */
  readonly fleet?: Fleet;
  /** `limits.in_flight_bytes`: the places large bodies take while they are read, planned and forwarded. */
  readonly bodies?: BodyBudget;
  /** The key of compactor's sealed items (`/v1/responses/compact`'s compaction items), opened before the read. */
  readonly seal?: NotesSeal;
  /** Told of the carried items opened, or of one refused (the metrics). */
  readonly onCarried?: (outcome: 'opened' | 'refused', count: number) => void;
  /** The engine's known conversations: each request's print (ledger digests, dashboard id) digests only what is new. */
  readonly prefixes?: KnownPrefixes;
}

export class ChatRoute {
  readonly options: ChatRouteOptions;
  /** How the client's headers are forwarded: the same for every request. */
  readonly forwardHeaders: ForwardRequestHeadersOptions;
  readonly format: WireFormat;
  /** How its bodies are read: the format, `pairs:`, and observe mode (pairs checked and reported, never repaired or refused). */
  readonly read: ReadSettings;

  constructor(options: ChatRouteOptions) {
    this.options = options;
    this.format = options.format;
    this.read = { format: this.format, pairs: options.config.pairs, observing: options.config.compaction.mode === 'observe', maxItems: options.config.limits.max_items, maxValues: options.config.limits.max_values };
    this.forwardHeaders = { apiKey: options.upstream.apiKey, dropAcceptEncoding: true };
  }
}
