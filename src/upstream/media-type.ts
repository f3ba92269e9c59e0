/** Media types as compactor reads them from `Content-Type`, on either side of the proxy. */

/** The media type of a `Content-Type` value, lower-cased, without parameters. */
export function mediaTypeOf(value: string | string[] | undefined): string {
  const text = Array.isArray(value) ? (value[0] ?? '') : (value ?? '');
  const end = text.indexOf(';');
  return (end === -1 ? text : text.slice(0, end)).trim().toLowerCase();
}

export function isJsonMediaType(mediaType: string): boolean {
  return mediaType === 'application/json' || mediaType.endsWith('+json');
}

export const EVENT_STREAM = 'text/event-stream';
