/**
 * One copy of each repeated string in the caches (podrefs, container ids, node names, namespaces),
 * which, parsed from separate API answers, would each be a string of their own. V8 keeps one
 * internalized copy of every property name, in a table that does not keep its strings alive, and a
 * key read back from an object is that copy: no table of our own to prune. Strings that look like
 * array indices are not property names and come back as they are.
 */
export const intern = (s: string): string => {
  const holder: Record<string, 0> = { [s]: 0 }
  for (const key in holder) return key
  return s
}

/** `intern` for optional strings. */
export const internOptional = (s: string | undefined): string | undefined => (s === undefined ? undefined : intern(s))
