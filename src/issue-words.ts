/**
 * How compactor words what was wrong with something it was given: the path
 * of the bad value and what was expected there, in one place for the
 * configuration (read by a person from YAML) and the chat body (read by a
 * developer from JSON).
 */

/**
 * Renders a path as it is written in YAML and JavaScript.
 *
 * @example
 * formatPath(['models', '*', 'context_window']) // → 'models["*"].context_window'
 * formatPath(['messages', 3, 'role'])           // → 'messages[3].role'
 */
export function formatPath(path: readonly PropertyKey[]): string {
  let text = '';
  for (const key of path) {
    if (typeof key === 'number') text += `[${key}]`;
    else if (typeof key === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) text += text === '' ? key : `.${key}`;
    else text += `[${JSON.stringify(String(key))}]`;
  }
  return text === '' ? '(root)' : text;
}

/** Whose words: a YAML file has mappings, a JSON body objects; both have lists. */
export type Vocabulary = 'yaml' | 'json';

/**
 * A type zod expected, as a person would name it.
 *
 * @example
 * describeType('object', 'yaml') // → 'a mapping'
 * describeType('object', 'json') // → 'an object'
 */
export function describeType(expected: string, vocabulary: Vocabulary): string {
  switch (expected) {
    case 'object':
      return vocabulary === 'yaml' ? 'a mapping' : 'an object';
    case 'array':
      return 'a list';
    case 'int':
      return 'an integer';
    case 'boolean':
      return 'true or false';
    default:
      return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
  }
}
