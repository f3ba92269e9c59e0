import { ProxyError } from '../http/errors.js';

/** The errors the compaction engine answers a request with, in OpenAI's shape. */

/** 400: even compacted, the conversation's last turn (or step) leaves no room for the answer. */
export class ContextLengthExceededError extends ProxyError {
  /**
   * @param neededTokens the prompt compacted as far as it goes (without the summary when `summaryTokens` is given)
   * @param summaryTokens what a summary of the earlier turns may add, when one would be needed too
   */
  constructor(
    readonly neededTokens: number,
    readonly window: number,
    readonly reservedTokens: number,
    readonly summaryTokens = 0,
  ) {
    const needed = Math.ceil(neededTokens);
    // On a small window the turn itself may fit, and the room kept for the answer and the notes be what does not.
    const turnFits = summaryTokens > 0 && needed + reservedTokens <= window;
    super({
      status: 400,
      type: 'invalid_request_error',
      code: 'context_length_exceeded',
      param: 'messages',
      message:
        `This conversation needs about ${needed} tokens for its prompt plus ${reservedTokens} reserved for the answer, ` +
        `but the model's context window is ${window} tokens` +
        (turnFits
          ? `: its last turn fits, but not with a summary of the earlier turns (up to ${summaryTokens} more tokens, compaction.summary.max_tokens). Lower max_tokens or the summary's size, or serve a larger window.`
          : `; even compacted, its last turn does not fit. Shorten the last message or lower max_tokens.`),
    });
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
