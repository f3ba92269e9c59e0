/** An SSE comment line: clients ignore it, so it can carry progress without changing the answer. */
export function sseComment(text: string): string {
  return `: ${text.replace(/[\r\n]+/g, ' ')}\n\n`;
}
