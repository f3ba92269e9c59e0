import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_TIMEOUT_MS, harnessForFile, runScriptedAgent } from './harness.js';
import { TASK } from './shop-project.js';

/**
 * opencode 1.18.33 (`opencode run`), headless, through compactor to the
 * scripted llama-server. Its fixed part is about 8k tokens (a 9.7k-character
 * system prompt and 10 tools of 21k characters), so a 32k window (a 24k
 * budget once its max_tokens of 8192 is reserved) leaves room for two epochs
 * within the 25-step task.
 */

const WINDOW = 32_768;

const harness = harnessForFile(WINDOW);

/** opencode's configuration: one OpenAI-compatible provider (compactor), every permission allowed, nothing fetched. */
function configure(baseUrl: string, home: string): Record<string, string> {
  const directory = join(home, '.config/opencode');
  mkdirSync(directory, { recursive: true });
  const config = {
    $schema: 'https://opencode.ai/config.json',
    provider: {
      llama: {
        npm: '@ai-sdk/openai-compatible',
        name: 'llama-server via compactor',
        options: { baseURL: `${baseUrl}/v1`, apiKey: 'sk-local' },
        models: { scripted: { name: 'scripted', limit: { context: WINDOW, output: 8_192 } } },
      },
    },
    model: 'llama/scripted',
    small_model: 'llama/scripted',
    permission: { '*': 'allow' },
    autoupdate: false,
    share: 'disabled',
  };
  writeFileSync(join(directory, 'opencode.json'), JSON.stringify(config, null, 2));
  return {
    // No network at start: no models.dev list, no update check, no LSP downloads, no plugins fetched.
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
    // compactor does the compaction here: opencode's own would hide whether compactor's works.
    OPENCODE_DISABLE_AUTOCOMPACT: '1',
    OPENCODE_DISABLE_PRUNE: '1',
  };
}

describe('opencode through compactor', () => {
  it(
    'finishes a 25-step task across at least two epochs, every prompt inside the window, every pair valid',
    async () => {
      const figures = await runScriptedAgent(harness(), 'opencode', ['run', TASK], configure);
      const { llama } = harness();

      // What opencode sends: tool_choice "auto", string contents, "" beside tool_calls, its session headers, a title request first.
      const main = llama.requestsOf('main');
      expect(main[0]!.body['tool_choice']).toBe('auto');
      expect(main[0]!.headers['x-session-id']).toEqual(expect.any(String));
      expect(llama.received[0]!.kind).toBe('side');
      console.info(`opencode: ${JSON.stringify(figures)}`);
    },
    AGENT_TIMEOUT_MS + 20_000,
  );
});
