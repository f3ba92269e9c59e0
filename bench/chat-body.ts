/** The chat request the performance benches send (bench/performance.ts, bench/side-by-side.ts). */

/** A 2 KB chat history (system, six exchanges, a last question), as an agent's client would send it. */
export function chatBody(model: string, stream: boolean): string {
  const messages: Array<{ role: string; content: string }> = [{ role: 'system', content: 'You are a concise assistant for a software team. Answer in plain text.' }];
  const sentence = (index: number): string =>
    `Question ${index}: how should the build handle module ${index * 7} when its tests are slow and the cache is cold? Keep it short please.`;
  for (let index = 1; index <= 6; index++) {
    messages.push({ role: 'user', content: sentence(index) });
    messages.push({ role: 'assistant', content: `Answer ${index}: split module ${index * 7}'s tests, warm the cache in CI first, and run the slow ones nightly only.` });
  }
  messages.push({ role: 'user', content: sentence(7) });
  const body: Record<string, unknown> = { model, messages, max_tokens: 64, temperature: 0.2 };
  if (stream) body['stream'] = true;
  let text = JSON.stringify(body);
  // Pad the system message so the body is 2048 bytes exactly.
  messages[0]!.content += ' '.repeat(Math.max(0, 2048 - text.length));
  text = JSON.stringify(body);
  return text;
}
