/**
 * Counts the work a pure pass does, without a clock: every element an array
 * method visits (callbacks of find/filter/map/…, elements scanned by
 * indexOf/includes, copied by slice/concat/reverse/spread or visited by
 * for-of) and every property read of the input (a deep proxy), so a pass
 * that scans its input once per item shows as quadratic even when it uses a
 * plain index loop, and the bytes a `Buffer#indexOf` scans (the splice of the
 * forwarded body searches bytes). The meter is only as honest as what it sees: Map and Set
 * operations count as one each (they are constant time), string work is not
 * counted (it is linear in the bytes, which the inputs keep proportional).
 */

type Method = (this: unknown[], ...args: unknown[]) => unknown;

/** Bytes a Buffer search scans per counted operation: a memchr-speed scan is far cheaper than an element visit. */
const BYTES_PER_OPERATION = 64;

const CALLBACK_METHODS = ['find', 'findIndex', 'findLast', 'findLastIndex', 'filter', 'map', 'some', 'every', 'forEach', 'reduce', 'reduceRight', 'flatMap'] as const;
const SCANNING_METHODS = ['indexOf', 'lastIndexOf', 'includes', 'slice', 'concat', 'reverse', 'join', 'sort', 'splice', 'fill', 'toReversed', 'toSorted'] as const;

/** What a scanning method costs: a copy its result's length, a search up to where it stopped, the rest the whole array. */
function elementsVisited(name: string, array: unknown[], result: unknown): number {
  if (name === 'slice' || name === 'concat') return Array.isArray(result) ? result.length : array.length;
  if (name === 'indexOf') return typeof result === 'number' && result >= 0 ? result + 1 : array.length;
  if (name === 'lastIndexOf') return typeof result === 'number' && result >= 0 ? array.length - result : array.length;
  return array.length;
}

export interface WorkMeter {
  /** Runs `pass` with the meter on and returns how many operations it counted. */
  measure(pass: () => unknown): number;
  /** The deep, counting proxy of a value; pass the input through it. */
  watch<T>(value: T): T;
}

export function workMeter(): WorkMeter {
  let count = 0;
  let on = false;
  const proxies = new WeakMap<object, object>();
  const handler: ProxyHandler<object> = {
    get(target, key, receiver) {
      if (on) count++;
      const value: unknown = Reflect.get(target, key, receiver);
      return typeof value === 'object' && value !== null ? watch(value) : value;
    },
  };
  function watch<T>(value: T): T {
    if (typeof value !== 'object' || value === null || ArrayBuffer.isView(value)) return value; // a Buffer's methods need the real receiver
    const known = proxies.get(value);
    if (known !== undefined) return known as T;
    const proxy = new Proxy(value, handler);
    proxies.set(value, proxy);
    return proxy as T;
  }

  const arrayProto = Array.prototype as unknown as Record<string, Method>;
  const iteratorProto = Object.getPrototypeOf([][Symbol.iterator]()) as { next: (this: unknown) => unknown };
  function install(): () => void {
    const saved = new Map<string, Method>();
    for (const name of CALLBACK_METHODS) {
      const original = arrayProto[name]!;
      saved.set(name, original);
      arrayProto[name] = function (this: unknown[], callback: unknown, ...rest: unknown[]) {
        const counted = typeof callback === 'function' ? (...args: unknown[]) => { if (on) count++; return (callback as (...a: unknown[]) => unknown)(...args); } : callback;
        return original.call(this, counted, ...rest);
      };
    }
    for (const name of SCANNING_METHODS) {
      const original = arrayProto[name];
      if (original === undefined) continue;
      saved.set(name, original);
      arrayProto[name] = function (this: unknown[], ...args: unknown[]) {
        const result = original.apply(this, args);
        if (on) count += 1 + elementsVisited(name, this, result);
        return result;
      };
    }
    // A Buffer search costs the bytes it scanned (from where it started to where it stopped).
    const bufferIndexOf = Buffer.prototype.indexOf;
    Buffer.prototype.indexOf = function (this: Buffer, value: string | number | Uint8Array, byteOffset?: number | BufferEncoding, encoding?: BufferEncoding) {
      const found = bufferIndexOf.call(this, value, byteOffset as number, encoding);
      const from = typeof byteOffset === 'number' ? (byteOffset < 0 ? Math.max(0, this.length + byteOffset) : byteOffset) : 0;
      if (on) count += 1 + Math.max(0, (found === -1 ? this.length : found) - from) / BYTES_PER_OPERATION;
      return found;
    };
    const next = iteratorProto.next;
    iteratorProto.next = function (this: unknown) {
      if (on) count++;
      return next.call(this);
    };
    return () => {
      for (const [name, original] of saved) arrayProto[name] = original;
      Buffer.prototype.indexOf = bufferIndexOf;
      iteratorProto.next = next;
    };
  }

  return {
    watch,
    measure(pass) {
      const uninstall = install();
      count = 0;
      on = true;
      try {
        pass();
      } finally {
        on = false;
        uninstall();
      }
      return count;
    },
  };
}

/**
 * How much the work grows when the input doubles: `work(2n) / work(n)`, each
 * measured on a fresh input (built outside the meter).
 */
export function growth(build: (size: number) => unknown, pass: (input: never) => unknown, size: number): { small: number; large: number; ratio: number } {
  const meter = workMeter();
  const measureAt = (n: number): number => {
    const input = meter.watch(build(n));
    return meter.measure(() => pass(input as never));
  };
  measureAt(Math.max(1, size >> 3)); // warm: lazy initialisation is not the pass's work
  const small = measureAt(size);
  const large = measureAt(size * 2);
  return { small, large, ratio: large / small };
}
