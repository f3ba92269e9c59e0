import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { contentText } from './scripted-llama.js';
import { AGENT_TIMEOUT_MS, harnessForFile, runScriptedAgent } from './harness.js';
import { TASK } from './shop-project.js';

/**
 * qwen-code 0.24.4 (`qwen -p`), headless, through compactor to the scripted
 * llama-server. Its fixed part is about 17k tokens (a 27k-character system
 * prompt and 14 tools of 39k characters) plus a first user message of about
 * 2.5k tokens of `<system-reminder>` parts, and it asks max_tokens 32768:
 * compactor reserves a quarter of the window for the answer.
 */

const WINDOW = 49_152;

const harness = harnessForFile(WINDOW);

/** qwen-code's settings: no telemetry, no update check; the endpoint comes from the environment. */
function configure(baseUrl: string, home: string): Record<string, string> {
  const directory = join(home, '.qwen');
  mkdirSync(directory, { recursive: true });
  const settings = {
    telemetry: { enabled: false },
    privacy: { usageStatisticsEnabled: false },
    general: { disableAutoUpdate: true, disableUpdateNag: true },
  };
  writeFileSync(join(directory, 'settings.json'), JSON.stringify(settings, null, 2));
  return {
    OPENAI_API_KEY: 'sk-local',
    OPENAI_BASE_URL: `${baseUrl}/v1`,
    OPENAI_MODEL: 'scripted',
    QWEN_CODE_SUPPRESS_YOLO_WARNING: '1',
  };
}

describe('qwen-code through compactor', () => {
  it(
    'finishes a 25-step task across at least two epochs, every prompt inside the window, every pair valid',
    async () => {
      const figures = await runScriptedAgent(harness(), 'qwen', ['--auth-type', 'openai', '--approval-mode', 'yolo', '-p', TASK], configure);
      const { llama } = harness();

      // What qwen-code sends: text parts for user and tool content, <system-reminder> parts in the first user message.
      const main = llama.requestsOf('main');
      const firstUser = (main[0]!.body['messages'] as Array<{ role: string; content: unknown }>).find((message) => message.role === 'user')!;
      expect(Array.isArray(firstUser.content)).toBe(true);
      expect(contentText(firstUser.content)).toContain('<system-reminder>');
      console.info(`qwen-code: ${JSON.stringify(figures)}`);
    },
    AGENT_TIMEOUT_MS + 20_000,
  );
});
