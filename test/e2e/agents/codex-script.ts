import { responsesView } from '../../../src/formats/responses/read.js';
import { findPairProblems } from '../../../src/transcript/pairs.js';
import type { FakeExchange } from '../../support/fake-upstream.js';
import type { SimulatedLlama } from '../../support/simulated-llama.js';

/**
 * A scripted double of llama-server's `/v1/responses` for Codex CLI (its
 * Responses stream: `response.created`, the output item added and done,
 * `response.completed` with `usage`): each main request is answered with the
 * next scripted `exec_command` call reading `parts/part-<step>.txt` (Codex
 * runs it for real), then one writing `result.txt`, then a final text. The
 * prompt is counted by the simulated llama-server, as its chat route reads
 * it (llama-server converts a Responses request to chat messages), so its
 * slot holds what a summary's prompt can reuse.
 */

export const RESULT_LINE = 'all parts read';

export interface Received {
  /** The `input` items as they reached the server. */
  readonly input: Record<string, unknown>[];
  readonly tokens: number;
  readonly cacheTokens: number;
  readonly pairProblems: number;
}

export class CodexScript {
  readonly received: Received[] = [];
  step = 0;

  constructor(
    readonly llama: SimulatedLlama,
    /** How many files it reads before it writes the result. */
    readonly steps: number,
  ) {}

  readonly reply = async (exchange: FakeExchange): Promise<void> => {
    const body = exchange.request.json as Record<string, unknown> & { model: string };
    const view = responsesView(body);
    // The simulated llama-server's answer is not used: only its count and its slot, whose reuse the answer's usage
    // reports as llama-server does (`input_tokens_details.cached_tokens`: what it took from the slot).
    const sink = { writeHead: () => sink, end: () => sink };
    await this.llama.chat({ ...exchange, response: sink as never, request: { ...exchange.request, json: { ...view.chat, messages: view.chat.messages.map((message) => ({ ...message })) } } });
    const record = this.llama.records.at(-1)!;
    const tokens = record.promptTokens;
    const input = Array.isArray(body['input']) ? (body['input'] as Record<string, unknown>[]) : [];
    this.received.push({ input, tokens, cacheTokens: record.cacheTokens, pairProblems: findPairProblems(view.chat.messages).length });
    const step = this.step++;
    const item =
      step < this.steps
        ? { type: 'function_call', id: `fc_${step}`, status: 'completed', call_id: `call_${step}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `cat parts/part-${step}.txt` }) }
        : step === this.steps
          ? { type: 'function_call', id: `fc_${step}`, status: 'completed', call_id: `call_${step}`, name: 'exec_command', arguments: JSON.stringify({ cmd: `echo '${RESULT_LINE}' > result.txt` }) }
          : { type: 'message', id: `msg_${step}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Done: every part read.', annotations: [] }] };
    const response = { id: `resp_${step}`, object: 'response', created_at: 1795997435, status: 'completed', model: body.model, output: [item], usage: { input_tokens: tokens, input_tokens_details: { cached_tokens: record.cacheTokens }, output_tokens: 20, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: tokens + 20 } };
    const event = (type: string, data: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    exchange.response.writeHead(200, { 'content-type': 'text/event-stream' });
    exchange.response.end(
      event('response.created', { response: { ...response, status: 'in_progress', output: [] } }) +
        event('response.output_item.added', { output_index: 0, item }) +
        event('response.output_item.done', { output_index: 0, item }) +
        event('response.completed', { response }),
    );
  };
}
