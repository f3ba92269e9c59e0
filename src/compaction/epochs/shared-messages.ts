import { createHash } from 'node:crypto';
import type { ChatMessage } from '../../transcript/message.js';

/**
 * What a message costs to hold, in bytes, about: its JSON text (V8 keeps
 * ASCII strings at a byte a character) plus the object's own overhead. An
 * estimate that errs high, so a bound in bytes holds in RSS too.
 */
export function messageBytes(message: ChatMessage): number {
  return JSON.stringify(message).length + MESSAGE_OVERHEAD_BYTES;
}

/** Object headers, hidden classes and property slots of one parsed message: measured ~150–250 bytes in V8; the high end. */
const MESSAGE_OVERHEAD_BYTES = 256;

/**
 * Messages shorter than this are held by each epoch itself: sharing costs a
 * hash and a table slot, worth it only for the large pieces many
 * conversations repeat (an agent's 12 KB system prompt, its tool list).
 */
export const SHARED_FROM_BYTES = 1024;

interface Held {
  readonly message: ChatMessage;
  readonly bytes: number;
  holders: number;
}

/**
 * One copy of each large message that several epochs hold alike (a head, a
 * system prompt): 20,000 conversations of one agent keep its system prompt
 * once, not 20,000 times. Counted by holders: a message goes when the last
 * epoch that held it does. Messages are never mutated (the transcript core's
 * rule), so one object can stand in every epoch.
 */
export class SharedMessages {
  readonly #held = new Map<string, Held>();
  #bytes = 0;

  /** Bytes of the messages held here, each counted once. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The shared copy of `message` (now held once more), with its key, or null when it is too small to share. */
  share(message: ChatMessage): { message: ChatMessage; key: string; bytes: number } | null {
    const text = JSON.stringify(message);
    if (text.length < SHARED_FROM_BYTES) return null;
    const key = createHash('sha256').update(text).digest('base64url');
    let held = this.#held.get(key);
    if (held === undefined) {
      held = { message, bytes: text.length + MESSAGE_OVERHEAD_BYTES, holders: 0 };
      this.#held.set(key, held);
      this.#bytes += held.bytes;
    }
    held.holders++;
    return { message: held.message, key, bytes: held.bytes };
  }

  /** One holder of `key` let it go. */
  release(key: string): void {
    const held = this.#held.get(key);
    if (held === undefined) return;
    held.holders--;
    if (held.holders > 0) return;
    this.#held.delete(key);
    this.#bytes -= held.bytes;
  }
}
