import { prefixHashes } from '../compaction/epochs/prefix-hash.js';
import { headLength } from '../transcript/groups.js';
import type { ChatMessage } from '../transcript/message.js';

/**
 * The name of a conversation's home slot: the prefix hash of its tenant, its
 * model, its head and its first message after the head, as the epochs name
 * a conversation (EpochWriter.conversationOf). Every turn of a conversation
 * has the same one; two conversations that share a system prompt do not.
 * Read from the client's messages, not the forwarded ones, which change
 * with every epoch.
 *
 * @example
 * conversationKey({ tenant: '', model: 'm' }, [system, firstUser, ...rest]) === conversationKey({ tenant: '', model: 'm' }, [system, firstUser])
 */
export function conversationKey(seed: { readonly tenant: string; readonly model: string }, messages: readonly ChatMessage[], known?: readonly string[]): string {
  const upTo = Math.min(headLength(messages) + 1, messages.length);
  // `known`: the chain the request's read already made of the same seed and messages (it reaches the first real user
  // message, never before this link): the link is read, not hashed again.
  if (known !== undefined && known.length > upTo) return known[upTo]!;
  return prefixHashes(seed, messages, upTo)[upTo]!;
}
