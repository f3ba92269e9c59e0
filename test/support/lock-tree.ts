/**
 * Which packages `npm ci` installs from a package-lock.json (lockfileVersion
 * 3), computed without installing: the packages reachable from the root
 * through dependencies, optional dependencies and required peers, resolved
 * as Node resolves them (nested node_modules first), minus those whose
 * os / cpu / libc do not fit the platform. An optional package that does not
 * fit is skipped with everything only it needed. Not modelled: npm also
 * skips an optional package whose `engines` exclude the running Node (the
 * agents' lock has one, @qwen-code/audio-capture on Node 20; the project's has none).
 */

interface LockEntry {
  readonly dev?: boolean;
  readonly os?: readonly string[];
  readonly cpu?: readonly string[];
  readonly libc?: readonly string[];
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
  readonly optionalDependencies?: Readonly<Record<string, string>>;
  readonly peerDependencies?: Readonly<Record<string, string>>;
  readonly peerDependenciesMeta?: Readonly<Record<string, { optional?: boolean }>>;
}

export interface Lock {
  readonly packages: Readonly<Record<string, LockEntry>>;
}

export interface Platform {
  readonly platform: string;
  readonly arch: string;
  /** glibc or musl on Linux; null elsewhere. */
  readonly libc: string | null;
}

function fits(entry: LockEntry, target: Platform): boolean {
  const allows = (list: readonly string[] | undefined, value: string | null): boolean =>
    list === undefined || value === null || list.some((item) => (item.startsWith('!') ? item.slice(1) !== value : item === value));
  return allows(entry.os, target.platform) && allows(entry.cpu, target.arch) && (target.platform !== 'linux' || allows(entry.libc, target.libc));
}

/** Node's resolution in the lock's flat map: `from`'s own node_modules, then each parent's, then the root's. */
function resolve(lock: Lock, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base === '' ? '' : `${base}/`}node_modules/${name}`;
    if (lock.packages[candidate] !== undefined) return candidate;
    if (base === '') return undefined;
    const cut = base.lastIndexOf('/node_modules/');
    base = cut === -1 ? '' : base.slice(0, cut);
  }
}

/** The lock paths `npm ci` installs (`omitDev`: as with `--omit=dev`). */
export function installedFromLock(lock: Lock, target: Platform, options: { omitDev?: boolean } = {}): Set<string> {
  const installed = new Set<string>();
  const visit = (from: string, names: readonly string[]): void => {
    for (const name of names) {
      const path = resolve(lock, from, name);
      if (path === undefined || installed.has(path)) continue;
      const entry = lock.packages[path]!;
      if ((options.omitDev === true && entry.dev === true) || !fits(entry, target)) continue;
      installed.add(path);
      const peers = Object.keys(entry.peerDependencies ?? {}).filter((peer) => entry.peerDependenciesMeta?.[peer]?.optional !== true);
      visit(path, [...Object.keys(entry.dependencies ?? {}), ...Object.keys(entry.optionalDependencies ?? {}), ...peers]);
    }
  };
  const root = lock.packages['']!;
  visit('', [...Object.keys(root.dependencies ?? {}), ...Object.keys(root.optionalDependencies ?? {}), ...(options.omitDev === true ? [] : Object.keys(root.devDependencies ?? {}))]);
  return installed;
}
