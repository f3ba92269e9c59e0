import type { ChatMessage } from '../transcript/message.js';

/**
 * Where a chat message of a format's transcript view came from: the index of
 * the wire message (or input item) it stands for. Kept under a symbol, so it
 * rides along when the core copies a message with a spread (`{ ...message,
 * content }`: prune, steps notes, pair repairs) and never reaches the wire
 * (`JSON.stringify` skips symbol keys). A chat message without one is the
 * core's own (a summary pair, a missing result): it is converted afresh.
 */

export const ORIGIN = Symbol('compactor.origin');

export interface Origin {
  /** The index of the wire message (Messages API) or input item (Responses API). */
  readonly index: number;
  /** The chat message exactly as the adapter made it: the same object means nothing changed. */
  readonly made: ChatMessage;
  /** The position of the content block it was made from, when one block made it (a Messages `tool_result`). */
  readonly block?: number;
}

type Tagged = ChatMessage & { [ORIGIN]?: Origin };

export function tag(message: ChatMessage, index: number, block?: number): ChatMessage {
  const tagged = message as Tagged;
  tagged[ORIGIN] = block === undefined ? { index, made: message } : { index, made: message, block };
  return message;
}

export function originOf(message: ChatMessage): Origin | undefined {
  return (message as Tagged)[ORIGIN];
}

/** Whether `message` is exactly what the adapter made (the core changed nothing in it). */
export function isUnchanged(message: ChatMessage): boolean {
  return originOf(message)?.made === message;
}

/** Runs of consecutive chat messages from the same wire message; a message of the core's own is a run by itself. */
export function runsByOrigin(messages: readonly ChatMessage[]): ChatMessage[][] {
  const runs: ChatMessage[][] = [];
  let previous: number | undefined;
  for (const message of messages) {
    const index = originOf(message)?.index;
    const last = runs[runs.length - 1];
    if (index !== undefined && index === previous && last !== undefined) last.push(message);
    else runs.push([message]);
    previous = index;
  }
  return runs;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
