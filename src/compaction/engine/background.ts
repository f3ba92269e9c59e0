import type { SummaryBackoff } from '../summary-calls/backoff.js';
import type { EpochWriter } from './epoch-writer.js';
import type { SingleFlight } from '../epochs/single-flight.js';
import { derivesFromTruncation } from '../epochs/truncations.js';
import type { EpochRepository } from '../epochs/repository.js';
import { type CompactionRequest, keptForLater, seenWhole } from './request.js';
import type { CompactionLogger } from '../ports.js';
import { type CandidateSizes, type DecisionSettings, decideAhead } from '../policy/decide.js';
import type { TierList } from '../policy/tiers/tier.js';
import { type Candidate, candidateOf } from '../policy/plan.js';
import { sizesOf } from '../policy/sizing.js';
import type { TokenRatios } from '../sizes/token-ratio.js';
import type { Epoch } from '../types.js';

/**
 * The epochs prepared ahead of need: between the soft threshold and the
 * threshold, once the answer has been streamed, the next epoch is computed in
 * the background, so the request that crosses the threshold applies it with
 * no waiting. Also where a compaction on top of a truncation finds the
 * original messages beneath it.
 */

export interface BackgroundOptions {
  readonly epochs: EpochRepository;
  readonly flights: SingleFlight<Epoch | null>;
  readonly writer: EpochWriter;
  readonly backoff: SummaryBackoff;
  readonly ratios: TokenRatios;
  readonly settings: DecisionSettings;
  readonly tiers: TierList;
  readonly logger: CompactionLogger | undefined;
}

export class Background {
  readonly #options: BackgroundOptions;

  constructor(options: BackgroundOptions) {
    this.#options = options;
  }

  /** The key of the summary running for a prefix of this history, if any. */
  runningFor(hashes: readonly string[]): string | undefined {
    const { flights } = this.#options;
    if (flights.size === 0) return undefined;
    for (let index = hashes.length - 1; index >= 0; index--) if (flights.has(hashes[index]!)) return hashes[index];
    return undefined;
  }

  /** Starts the next epoch in the background (single flight), unless one is already pending or running for this conversation. */
  start(request: CompactionRequest, current: Candidate, currentSizes: CandidateSizes, pending: Epoch | null): void {
    const { flights, writer, backoff, logger } = this.#options;
    // The lookup's pending epoch lies beyond the epoch in use (the lookup dropped stale ones).
    if (pending !== null || this.runningFor(request.hashes) !== undefined) return;
    // The epoch in use was made from this very history (a compression, or a pending summary applied with its kept results
    // compressed): an epoch prepared now would be stored under its key, in its place. The next request prepares one.
    if (current.epoch?.key === seenWhole(request).key) return;
    // Within a failure's back-off there is nothing to try: each request of the conversation counted a failed compaction here.
    if (backoff.has(writer.conversationOf(request))) return;
    // The flight is taken at once, so a request crossing the threshold meanwhile waits for it rather than start another.
    // Only what the summary needs is kept while it waits (no closure here may name `request`: it would hold all of it).
    const kept = keptForLater(request);
    flights.run(seenWhole(request).key, (signal) => this.#prepareAhead(kept, current, currentSizes, signal)).catch((error: unknown) => {
      logger?.warn({ model: kept.model, reason: error instanceof Error ? error.message : String(error) }, 'background summary failed');
    });
  }

  /** Whether a compaction of this candidate must be planned from beneath its truncation: it stands on one, and a summary may be tried. */
  repairs(request: CompactionRequest, candidate: Candidate): boolean {
    return derivesFromTruncation(candidate.epoch) && !this.#options.backoff.has(this.#options.writer.conversationOf(request));
  }

  /** The candidate made of the original messages beneath the candidate's truncation, and its sizes. */
  async beneath(request: CompactionRequest, candidate: Candidate): Promise<{ candidate: Candidate; sizes: CandidateSizes }> {
    const beneath = candidateOf(request.messages, await this.#options.epochs.forHistory(request).beneath(request.hashes, candidate.epoch!));
    const ratio = this.#options.ratios.get(request.model, request.tenant);
    return { candidate: beneath, sizes: { ...sizesOf(beneath.messages, request.toolsEstimate, ratio), ratio } };
  }

  /** The background epoch: on top of a truncation, written from the original messages, and in use at once (it replaces the truncation). */
  async #prepareAhead(request: CompactionRequest, current: Candidate, currentSizes: CandidateSizes, signal: AbortSignal): Promise<Epoch | null> {
    // Looked up again: the request's own lookup is older than its answer, and the background epoch of the
    // request before it (keyed by that shorter history) may have been written since. After the answer, off the hot path.
    // Not while another replica computes it either: that one is the conversation's next epoch.
    const now = await this.#options.epochs.forHistory(request).lookup(request.hashes);
    if (now.pending !== null || now.runningElsewhere !== undefined) return null;
    const repair = derivesFromTruncation(current.epoch);
    const { candidate, sizes } = repair ? await this.beneath(request, current) : { candidate: current, sizes: currentSizes };
    const decision = decideAhead(candidate, sizes, request.budget, this.#options.settings, this.#options.tiers);
    if (decision === null) return null;
    return this.#options.writer.write(request, candidate, decision, { signal, onProgress: undefined, pending: true, inUse: repair });
  }
}
