import type { ProxyError } from '../../errors.js';

/** compactor's errors as the OpenAI Responses API words them: its JSON body is OpenAI's error shape. */

export function responsesErrorBody(error: ProxyError): unknown {
  return error.toBody();
}

/** A Responses stream's error event: `event: error` with the error's fields (what the openai SDK reads). */
export function responsesErrorEvent(error: ProxyError): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', code: error.code, message: error.message, param: error.param })}\n\n`;
}
