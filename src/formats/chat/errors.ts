import type { ProxyError } from '../../errors.js';

/** compactor's errors in OpenAI's shape (`{"error":{"message","type","param","code"}}`), what chat completions clients read. */

export function chatErrorBody(error: ProxyError): unknown {
  return error.toBody();
}

/** The SSE event that tells a streaming client its answer failed; no `[DONE]` follows it. */
export function chatErrorEvent(error: ProxyError): string {
  return `data: ${JSON.stringify(error.toBody())}\n\n`;
}
