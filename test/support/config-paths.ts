/**
 * `listen.host`, `models.*.context_window`, …: the dotted paths of the values
 * of a configuration (a list is one value), to check that a document names
 * every key of the schema.
 */
export function leafPaths(value: unknown, prefix = ''): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [prefix];
  return Object.entries(value).flatMap(([key, child]) => leafPaths(child, prefix === '' ? key : `${prefix}.${key}`));
}
