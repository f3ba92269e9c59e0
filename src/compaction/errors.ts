import { ProxyError } from '../http/errors.js';

/** The errors the compaction engine answers a request with, in OpenAI's shape. */

/**
 * Where the room reserved for the answer came from: compactor's configuration,
 * or the request's own ceiling (capped at a quarter of the window), so the
 * 400 names the number the client can change, and only one it sent.
 */
export interface AnswerReservation {
  readonly tokens: number;
  readonly source: 'reserve_output_tokens' | 'max_tokens' | 'max_completion_tokens';
  /** The request's number before the quarter-of-the-window cap, when the cap applied. */
  readonly requested?: number;
}

function reservationText(reservation: AnswerReservation): string {
  if (reservation.source === 'reserve_output_tokens') return 'reserve_output_tokens';
  return reservation.requested === undefined
    ? `the request's ${reservation.source}`
    : `the request's ${reservation.source} of ${reservation.requested}, capped at a quarter of the window`;
}

/** What to lower: the request's field when it set the reservation, else compactor's own setting. */
function reservationAdvice(reservation: AnswerReservation): string {
  return reservation.source === 'reserve_output_tokens' ? 'lower reserve_output_tokens in compactor\'s configuration' : `lower ${reservation.source}`;
}

/** 400: even compacted, the conversation's last turn (or step) leaves no room for the answer. */
export class ContextLengthExceededError extends ProxyError {
  readonly reservedTokens: number;

  /**
   * @param neededTokens the prompt compacted as far as it goes (without the summary when `summaryTokens` is given)
   * @param reservation the room kept for the answer, and where that number came from
   * @param summaryTokens what a summary of the earlier turns may add, when one would be needed too
   */
  constructor(
    readonly neededTokens: number,
    readonly window: number,
    reservation: AnswerReservation,
    readonly summaryTokens = 0,
  ) {
    const needed = Math.ceil(neededTokens);
    const reserved = reservation.tokens;
    // On a small window the turn itself may fit, and the room kept for the answer and the notes be what does not.
    const turnFits = summaryTokens > 0 && needed + reserved <= window;
    super({
      status: 400,
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
      param: 'messages',
      message:
        `This conversation needs about ${needed} tokens for its prompt plus ${reserved} reserved for the answer (${reservationText(reservation)}), ` +
        `but the model's context window is ${window} tokens` +
        (turnFits
          ? `: its last turn fits, but not with a summary of the earlier turns (up to ${summaryTokens} more tokens, compaction.summary.max_tokens). ` +
            `Lower the summary's size, ${reservationAdvice(reservation)}, or serve a larger window.`
          : `; even compacted, its last turn does not fit. Shorten the last message, ${reservationAdvice(reservation)}, or serve a larger window.`),
    });
    this.reservedTokens = reserved;
  }
}

/** 502/504: a summary was needed, it failed, and `on_summary_failure` is `error`. */
export class SummaryFailedError extends ProxyError {
  constructor(reason: string, timedOut: boolean) {
    super({
      status: timedOut ? 504 : 502,
      type: 'server_error',
      code: timedOut ? 'summary_timeout' : 'summary_failed',
      message: `compactor could not summarize this conversation to fit the context window: ${reason}`,
    });
  }
}
