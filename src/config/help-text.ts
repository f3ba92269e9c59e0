/** The help text (`compactor --help`): every flag, and the environment variables that have no flag. */
export const USAGE = `Usage: compactor [options]
       compactor doctor [options]   check the upstream, the store and the configuration, one line each

Options:
  --config FILE               YAML configuration file (env COMPACTOR_CONFIG)
  --host HOST                 listen address (env COMPACTOR_HOST, default 127.0.0.1)
  --port PORT                 listen port (env COMPACTOR_PORT, default 8081)
  --upstream URL[,URL…]       upstream server, or a comma-separated fleet: upstream.servers (env COMPACTOR_UPSTREAM_URL, default http://127.0.0.1:8080)
  --context-window TOKENS     window of every model, or auto (env COMPACTOR_CONTEXT_WINDOW, default auto)
  --compaction on|off         compaction.enabled (env COMPACTOR_COMPACTION, default on)
  --observe                   compaction.mode observe: forward untouched, report what would be done (env COMPACTOR_MODE)
  --max-messages N            compaction.max_messages, 0 = off (env COMPACTOR_MAX_MESSAGES)
  --summary-model NAME        compaction.summary.model (env COMPACTOR_SUMMARY_MODEL)
  --summary-upstream URL      compaction.summary.upstream (env COMPACTOR_SUMMARY_UPSTREAM)
  --summary-prompt-file FILE  compaction.summary.prompt_file (env COMPACTOR_SUMMARY_PROMPT_FILE)
  --pairs MODE                repair | reject | off (env COMPACTOR_PAIRS)
  --log-level LEVEL           fatal | error | warn | info | debug | trace | silent (env COMPACTOR_LOG_LEVEL)
  --log-format FORMAT         json (default) | pretty: one readable line per event (env COMPACTOR_LOG_FORMAT)
  --print-config              print the effective configuration (secrets masked) and exit
  --version                   print the version and exit
  -h, --help                  print this help

Secrets are read from the environment only, never from flags (which other users can see):
  COMPACTOR_UPSTREAM_API_KEY  upstream.api_key
  COMPACTOR_SUMMARY_API_KEY   compaction.summary.api_key
  COMPACTOR_AUTH_KEYS         auth.keys, comma-separated
  COMPACTOR_REDIS_URL         cache.redis.url (redis:// or rediss://, may hold a password; comma-separated seed nodes of a cluster)
  COMPACTOR_ADMIN_KEYS        auth.admin_keys, comma-separated (see every tenant on the dashboard)
  COMPACTOR_REDIS_SECRET      cache.redis.secret: signs every value stored in Redis
  COMPACTOR_REDIS_KEY_SALT    cache.redis.key_salt: keys the tenant digests in Redis key names
  COMPACTOR_SEAL_KEY          compaction.seal_key: keys the compaction items /v1/responses/compact seals

Other settings without a flag:
  COMPACTOR_CACHE_STORE       cache.store: memory | redis
  COMPACTOR_REDIS_CLUSTER     cache.redis.cluster: on | off (a Redis Cluster: COMPACTOR_REDIS_URL names seed nodes)
  COMPACTOR_DASHBOARD         dashboard.enabled: on | off
  COMPACTOR_COMPRESS          compaction.compress.enabled: on | off
  COMPACTOR_SLOTS             upstream.slots: off (default) | auto
  COMPACTOR_SLOT_SAVE         upstream.slot_save: on | off
  COMPACTOR_SLOT_SAVE_SHARED  upstream.slot_save_shared: on | off (a fleet's servers share one --slot-save-path)
  COMPACTOR_MAX_CONNECTIONS   limits.max_connections: client connections at once, or auto
  COMPACTOR_REDUCE_MEMORY     memory.reduce_when_idle: on | off`;
