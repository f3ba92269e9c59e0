import type { ChatMessage } from '../message.js';
import { clearedInputMarker, hasMarker } from './markers.js';

/**
 * The inputs of the calls whose results were cleared, cleared too
 * (Anthropic's `clear_tool_uses` with `clear_tool_inputs`): each call's
 * `arguments` become `{"cleared_input": "[compressed: …]"}`, a marker that
 * says the input is nowhere else. Each result answers the call of its id in
 * its own step (the nearest assistant message before it that made it), as
 * the compression reads them. Pure: changed assistant messages are new
 * objects, the rest returned as they were.
 */

/** The key the cleared input's marker goes under: a call's arguments stay a JSON object. */
export const CLEARED_INPUT_KEY = 'cleared_input';

export function clearCallInputs(messages: readonly ChatMessage[], clearedResults: Iterable<number>, clearsTool: (tool: string) => boolean): readonly ChatMessage[] {
  let out: ChatMessage[] | null = null;
  for (const index of clearedResults) {
    const result = messages[index];
    const id = result?.tool_call_id;
    if (result?.role !== 'tool' || typeof id !== 'string') continue;
    for (let at = index - 1; at >= 0; at--) {
      const message = (out ?? messages)[at]!;
      if (message.role !== 'assistant') continue;
      const calls = message.tool_calls ?? [];
      const position = calls.findIndex((call) => call.id === id);
      if (position < 0) continue;
      const call = calls[position]!;
      const name = call.function?.name ?? 'tool';
      const args = call.function?.arguments ?? '';
      if (clearsTool(name) && !hasMarker(args)) {
        const cleared = { ...call, function: { ...call.function, name, arguments: JSON.stringify({ [CLEARED_INPUT_KEY]: clearedInputMarker(name, Buffer.byteLength(args)) }) } };
        out ??= messages.slice();
        out[at] = { ...message, tool_calls: calls.map((other, which) => (which === position ? cleared : other)) };
      }
      break;
    }
  }
  return out ?? messages;
}
