import { setTimeout as sleep } from 'node:timers/promises';
import { LEASE_POLL_MS } from '../epochs/lease.js';
import { type CandidateSizes, type Decision, compacts } from '../policy/decide.js';
import type { Candidate } from '../policy/plan.js';
import type { Epoch } from '../types.js';

/**
 * What one request's look-ups learned about the other replicas, so that it
 * decides as any replica would (issue 27): a lookup the store did not answer
 * is asked again patiently before a compaction is written on its strength,
 * and a summary another replica computes for this conversation is waited for
 * like one running here.
 */
export class ReplicaRounds {
  /** Whether a lookup the store did not answer in time has been asked again, patiently (once per request). */
  patient = false;
  /** Waits for a summary running here: what `decide` bounds by MAX_WAITS (polls of another replica's lease are not counted). */
  localWaits = 0;
  /** Until when a summary on another replica is waited for: as long as a summary may take here (its lease ends sooner when its holder dies). */
  readonly #waitsElsewhereUntil: number;
  readonly #now: () => number;

  constructor(now: () => number, summaryTimeoutMs: number) {
    this.#now = now;
    this.#waitsElsewhereUntil = now() + summaryTimeoutMs;
  }

  /** Whether this attempt is the request's first real lookup (the one that reads shared state and is counted). */
  isFirst(attempt: number): boolean {
    return attempt === (this.patient ? 1 : 0);
  }

  /** Another replica computing this conversation's next epoch counts as one running here: one replica would wait for it. */
  runsElsewhere(runningHere: string | undefined, runningElsewhere: string | undefined): boolean {
    return runningHere === undefined && runningElsewhere !== undefined && this.#now() < this.#waitsElsewhereUntil;
  }

  /**
   * A new epoch on the strength of an answer the store did not give (a fresh
   * process, a busy machine): another replica, answered, would reuse the
   * stored one. True once: look up again with the longer bound first.
   */
  asksAgain(decision: Decision, degraded: boolean): boolean {
    if (!compacts(decision) || !degraded || this.patient) return false;
    this.patient = true;
    return true;
  }

  /** One wait for a summary on another replica: the next lookup finds its epoch, or its lease gone (the holder died). */
  async pollElsewhere(signal: AbortSignal): Promise<void> {
    await sleep(LEASE_POLL_MS, undefined, { signal });
  }
}

/** One look-up's decision and what it was made over. */
export interface Step {
  readonly candidate: Candidate;
  readonly sizes: CandidateSizes;
  readonly decision: Decision;
  readonly pending: Epoch | null;
  /** The key of the summary running for a prefix of this history, if any. */
  readonly running: string | undefined;
  /** The learned ratio, as the first look-up may have adopted it from the shared store. */
  readonly ratio: number;
  /** The lease of this conversation's next epoch, held by another replica. */
  readonly runningElsewhere?: string;
  /** Look up again (patiently) before performing: the decision compacts on an answer the store did not give. */
  readonly again?: true;
}
