import type { ChatMessage } from '../../src/transcript/message.js';
import { factOf, turnMessages, type ConversationOptions } from '../support/conversation.js';

/**
 * Drives a scripted agent conversation through a chat endpoint the way an
 * agent does: one request when the user's task arrives and one after each
 * tool result, always with the whole history. The scripted assistant
 * messages stand in for the model's answers, so runs are reproducible.
 */

export interface AgentRunOptions extends ConversationOptions {
  /** `http://host:port` of the proxy (or the upstream, for a baseline). */
  readonly baseUrl: string;
  readonly model?: string;
  readonly tools?: unknown;
  readonly stream?: boolean;
  /** Rewrites the history before it is sent (a client-side baseline such as a sliding window). */
  readonly rewrite?: (messages: ChatMessage[]) => ChatMessage[];
  readonly onResponse?: (exchange: AgentExchange) => void;
}

export interface AgentExchange {
  readonly turn: number;
  readonly sent: ChatMessage[];
  readonly status: number;
  readonly report: string | null;
  readonly body: string;
}

export const AGENT_TOOLS = [
  {
    type: 'function',
    function: { name: 'bash', description: 'Run a shell command', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] } },
  },
];

export async function runAgent(options: AgentRunOptions): Promise<AgentExchange[]> {
  const exchanges: AgentExchange[] = [];
  const history: ChatMessage[] = [{ role: 'system', content: options.system ?? 'You are a careful coding agent.' }];
  const send = async (turn: number): Promise<void> => {
    const sent = options.rewrite === undefined ? [...history] : options.rewrite([...history]);
    const response = await fetch(`${options.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer agent-key' },
      body: JSON.stringify({
        model: options.model ?? 'sim',
        messages: sent,
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        ...(options.stream === true ? { stream: true, stream_options: { include_usage: true } } : {}),
      }),
    });
    const body = await response.text();
    const exchange = { turn, sent: [...history], status: response.status, report: response.headers.get('x-compactor'), body };
    exchanges.push(exchange);
    options.onResponse?.(exchange);
  };
  for (let turn = 1; turn <= options.turns; turn++) {
    const messages = turnMessages(turn, options);
    history.push(messages[0]!);
    await send(turn);
    // Each step: the assistant's call and its result, then the next request.
    for (let index = 1; index + 1 < messages.length - 1; index += 2) {
      history.push(messages[index]!, messages[index + 1]!);
      await send(turn);
    }
    history.push(messages.at(-1)!);
  }
  return exchanges;
}

/** The facts planted before `turn` (which every later prompt must still carry). */
export function factsBefore(turn: number): string[] {
  return Array.from({ length: turn - 1 }, (_, index) => factOf(index + 1));
}
