import { viaWithOwn } from './via.js';
import type { Sender } from './json-call.js';

/**
 * Whether the upstream is ready: llama-server's `/health` answers 200 once
 * the model is loaded (503 before). Servers without `/health` are asked for
 * `/v1/models` instead. Never throws: no answer is `status: null`.
 */

// Enough for a loaded server to answer /health; a readiness probe must not hang.
export const HEALTH_TIMEOUT_MS = 2_000;

export interface Health {
  readonly ready: boolean;
  readonly status: number | null;
}

async function probe(sender: Sender, path: string, timeoutMs: number): Promise<number | null> {
  try {
    const response = await sender.send({
      method: 'GET',
      path,
      headers: sender.apiKey === null ? { via: viaWithOwn(undefined) } : { authorization: `Bearer ${sender.apiKey}`, via: viaWithOwn(undefined) },
      body: null,
      signal: AbortSignal.timeout(timeoutMs),
    });
    await response.body.dump().catch(() => undefined);
    return response.statusCode;
  } catch {
    return null;
  }
}

export async function checkHealth(sender: Sender, timeoutMs = HEALTH_TIMEOUT_MS): Promise<Health> {
  let status = await probe(sender, '/health', timeoutMs);
  if (status === 404) status = await probe(sender, '/v1/models', timeoutMs);
  return { ready: status !== null && status >= 200 && status < 300, status };
}
