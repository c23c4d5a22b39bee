/**
 * One copy of each repeated string in the caches. The same podref is written in a pool entry per
 * interface, in a reservation per address and as the pod cache's key; a pod's container id in each
 * of its pool entries; a node name and a namespace in thousands of pods. Parsed from separate API
 * answers, every occurrence is its own string.
 *
 * V8 keeps one internalized copy of every property name, in a table that does not keep its strings
 * alive, and a name read back from an object's keys is that copy. So equal strings passed through
 * `intern` end up as one string, freed once nothing holds it, with no table of our own to prune.
 * Strings that look like array indices are not property names and come back as they are.
 */
export const intern = (s: string): string => {
  const holder: Record<string, 0> = { [s]: 0 }
  for (const key in holder) return key
  return s
}

/** `intern` for optional strings. */
export const internOptional = (s: string | undefined): string | undefined => (s === undefined ? undefined : intern(s))
