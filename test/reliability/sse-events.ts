/**
 * An SSE decoder as the WHATWG grammar describes it: lines end with CRLF, LF
 * or CR; `data` fields join with a newline; a blank line dispatches the event
 * (when it has data); comments and other fields are ignored. What a client
 * would decode, to compare what comes through compactor with what the
 * upstream sent.
 */
export function sseEventData(text: string, options: { dispatchAtEnd?: boolean } = {}): string[] {
  const events: string[] = [];
  let data: string[] = [];
  const dispatch = (): void => {
    if (data.length > 0) events.push(data.join('\n'));
    data = [];
  };
  const take = (line: string): void => {
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
  };
  const lines = text.split(/\r\n|\n|\r/);
  // What follows the last line end: a line the stream did not end.
  const unended = lines.pop() ?? '';
  for (const line of lines) {
    if (line === '') dispatch();
    else take(line);
  }
  // The spec discards an event the stream did not end with a blank line; many clients dispatch it.
  if (options.dispatchAtEnd === true) {
    if (unended !== '') take(unended);
    dispatch();
  }
  return events;
}
