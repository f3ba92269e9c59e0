import type { AnswerEdits } from '../../transcript/context-edits.js';
import { isRecord } from '../origin.js';
import type { AnswerEditor } from '../wire-format.js';

/**
 * What a request's context edits add to its answer, in the Messages API's
 * words (docs.claude.com, "Context editing" and "Compaction"; the beta types
 * of `@anthropic-ai/sdk`): `context_management.applied_edits` on the message
 * (streamed: on the `message_delta` event), and, when the prompt starts from
 * compactor's notes (`compact_20260112`), a `compaction` block whose
 * `content` is the notes, first in the content (streamed: a block of its own
 * before the model's, every later block's index one higher). A paused
 * compaction (`pause_after_compaction`) is the block alone, `stop_reason`
 * `compaction`. Pure: text in, text out.
 */

function compactionBlock(notes: string): Record<string, unknown> {
  return { type: 'compaction', content: notes };
}

function contextManagement(edits: AnswerEdits): Record<string, unknown> {
  return { applied_edits: edits.applied };
}

function frameOf(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}`;
}

/** The data of a frame, parsed, and its event name; undefined for a frame that is not one JSON event. */
function eventOf(frame: string): { name: string | undefined; data: Record<string, unknown> } | undefined {
  let name: string | undefined;
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    if (line.startsWith('event:')) name = line.slice('event:'.length).trim();
    else if (line.startsWith('data:')) data.push(line.slice('data:'.length).replace(/^ /, ''));
  }
  if (data.length === 0) return undefined;
  try {
    const parsed: unknown = JSON.parse(data.join('\n'));
    return isRecord(parsed) ? { name, data: parsed } : undefined;
  } catch {
    return undefined;
  }
}

export function messagesAnswerEditor(edits: AnswerEdits): AnswerEditor {
  const shift = edits.compaction === undefined ? 0 : 1;
  return {
    json(text) {
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        return text;
      }
      if (!isRecord(body) || body['type'] !== 'message') return text;
      const content = Array.isArray(body['content']) ? body['content'] : [];
      const edited = { ...body, content: edits.compaction === undefined ? content : [compactionBlock(edits.compaction), ...content], context_management: contextManagement(edits) };
      return JSON.stringify(edited);
    },
    frame(frame) {
      const event = eventOf(frame);
      if (event === undefined) return frame;
      const { data } = event;
      const type = data['type'];
      if (type === 'message_start' && edits.compaction !== undefined) {
        return [
          frame,
          frameOf('content_block_start', { type: 'content_block_start', index: 0, content_block: compactionBlock(edits.compaction) }),
          frameOf('content_block_stop', { type: 'content_block_stop', index: 0 }),
        ].join('\n\n');
      }
      if ((type === 'content_block_start' || type === 'content_block_delta' || type === 'content_block_stop') && shift > 0 && typeof data['index'] === 'number') {
        return frameOf(event.name ?? String(type), { ...data, index: data['index'] + shift });
      }
      if (type === 'message_delta') return frameOf(event.name ?? 'message_delta', { ...data, context_management: contextManagement(edits) });
      return frame;
    },
  };
}

/** The answer of a paused compaction: the `compaction` block alone, as a message or as its stream of events. */
export function pausedCompactionAnswer(edits: AnswerEdits & { compaction: string }, model: string, id: string, streamed: boolean): string {
  const usage = { input_tokens: 0, output_tokens: 0 };
  const message = { id, type: 'message', role: 'assistant', model, content: [compactionBlock(edits.compaction)], stop_reason: 'compaction', stop_sequence: null, usage, context_management: contextManagement(edits) };
  if (!streamed) return JSON.stringify(message);
  const frames = [
    frameOf('message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, context_management: null } }),
    frameOf('content_block_start', { type: 'content_block_start', index: 0, content_block: compactionBlock(edits.compaction) }),
    frameOf('content_block_stop', { type: 'content_block_stop', index: 0 }),
    frameOf('message_delta', { type: 'message_delta', delta: { stop_reason: 'compaction', stop_sequence: null }, usage: { output_tokens: 0 }, context_management: contextManagement(edits) }),
    frameOf('message_stop', { type: 'message_stop' }),
  ];
  return `${frames.join('\n\n')}\n\n`;
}
