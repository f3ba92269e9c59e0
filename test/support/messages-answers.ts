/**
 * The Messages API answers of the llama-server double (llama-server's
 * `/v1/messages` answers in Anthropic's shape: its README, "Anthropic
 * Messages API compatible"): one message, and the same as its stream of events.
 */

export const MESSAGE_ANSWER = {
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  model: 'sim',
  content: [{ type: 'text', text: 'Done.' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 12, output_tokens: 2 },
};

export const STREAM_EVENTS = [
  `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { ...MESSAGE_ANSWER, content: [], stop_reason: null, usage: { input_tokens: 12, output_tokens: 0 } } })}\n\n`,
  `event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n`,
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Do"}}\n\n`,
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ne."}}\n\n`,
  `event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n`,
  `event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":12,"output_tokens":2}}\n\n`,
  `event: message_stop\ndata: {"type":"message_stop"}\n\n`,
];
