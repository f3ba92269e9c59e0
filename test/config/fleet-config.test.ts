import { describe, expect, it } from 'vitest';
import { loadConfig, printableConfig } from '../../src/config/load.js';
import { parseConfig } from '../../src/config/schema.js';
import { parseDocument } from 'yaml';

/** upstream.servers (issue 39): a fleet of servers, or one URL as before. */

describe('upstream.servers', () => {
  it('one url is a fleet of one server with the defaults, as before', () => {
    const result = parseConfig({ upstream: { url: 'http://a:1', api_key: 'k' } });
    expect(result).toMatchObject({ ok: true, config: { upstream: { url: 'http://a:1', api_key: 'k', servers: [{ url: 'http://a:1', api_key: null, weight: 1, models: null }] } } });
  });

  it('takes a list of servers, each with its key, weight and models; url is the first', () => {
    const result = parseConfig({
      upstream: { servers: [{ url: 'http://a:1', api_key: 'ka', weight: 2 }, { url: 'http://b:2', models: ['qwen'] }] },
    });
    expect(result).toMatchObject({
      ok: true,
      config: {
        upstream: {
          url: 'http://a:1',
          servers: [
            { url: 'http://a:1', api_key: 'ka', weight: 2, models: null },
            { url: 'http://b:2', api_key: null, weight: 1, models: ['qwen'] },
          ],
        },
      },
    });
  });

  it('COMPACTOR_UPSTREAM_URL and --upstream take a comma-separated list', () => {
    const fromEnv = loadConfig({ env: { COMPACTOR_UPSTREAM_URL: 'http://a:1, http://b:2,http://c:3' } });
    expect(fromEnv.ok && fromEnv.config.upstream.servers.map((server) => server.url)).toEqual(['http://a:1', 'http://b:2', 'http://c:3']);
    const fromFlag = loadConfig({ argv: ['--upstream', 'http://a:1,http://b:2'], env: {} });
    expect(fromFlag.ok && fromFlag.config.upstream.servers.map((server) => server.url)).toEqual(['http://a:1', 'http://b:2']);
  });

  it('names what is wrong: a bad server, a url that is not one of the servers, a weight of 0', () => {
    const result = parseConfig({ upstream: { url: 'http://x:9', servers: [{ url: 'nope', weight: 0 }, { url: 'http://b:2', colour: 'red' }] } });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.errors).toEqual(
      expect.arrayContaining([
        'upstream.servers[0].url: expected a URL',
        'upstream.servers[0].weight: expected a positive number',
        'upstream.servers[1].colour: unknown key',
      ]),
    );
    const both = parseConfig({ upstream: { url: 'http://x:9', servers: [{ url: 'http://b:2' }] } });
    expect(both.ok === false && both.errors).toEqual(['upstream.url: set upstream.url or upstream.servers, not both (or name in url only servers of the list)']);
  });

  it('a printed configuration masks every server key and password, and reads back the same', () => {
    const loaded = loadConfig({ env: { COMPACTOR_UPSTREAM_URL: 'http://u:hunter2@a:1,http://b:2' } });
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    const withKey = { ...loaded.config, upstream: { ...loaded.config.upstream, servers: loaded.config.upstream.servers.map((server) => ({ ...server, api_key: 'sk-1' })) } };
    const printed = printableConfig(withKey);
    expect(printed).not.toContain('hunter2');
    expect(printed).not.toContain('sk-1');
    const again = parseConfig(parseDocument(printableConfig(loaded.config).replace(/\*\*\*/g, 'p')).toJS());
    expect(again.ok && again.config.upstream.servers.map((server) => server.url)).toEqual(['http://u:p@a:1/', 'http://b:2']);
  });
});
