/**
 * A scripted answer of llama-server's `/v1/responses` (the Responses API's
 * `response` object, openai-node `Response`), as JSON and as its stream:
 * what the doubles of the Responses route answer a forwarded request.
 */

export const RESPONSE = {
  id: 'resp_1',
  object: 'response',
  created_at: 1795997435,
  status: 'completed',
  model: 'sim',
  output: [{ type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Done.', annotations: [] }] }],
  usage: { input_tokens: 12, output_tokens: 2, total_tokens: 14 },
};

/** That answer streamed: created, "Done." in two deltas, completed. */
export const STREAM_EVENTS = [
  `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', sequence_number: 0, response: { ...RESPONSE, status: 'in_progress', output: [] } })}\n\n`,
  `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Do"}\n\n`,
  `event: response.output_text.delta\ndata: {"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"ne."}\n\n`,
  `event: response.completed\ndata: ${JSON.stringify({ response: RESPONSE, sequence_number: 3, type: 'response.completed' })}\n\n`,
];
