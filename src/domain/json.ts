/** Guards for reading parsed JSON (annotations, configs, API objects) field by field. */

/** A JSON object (not null, not an array). */
export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A JSON object, or an empty one when `u` is anything else. */
export const record = (u: unknown): Record<string, unknown> => (isRecord(u) ? u : {})

/** A JSON array, or none when `u` is anything else. */
export const list = (u: unknown): ReadonlyArray<unknown> => (Array.isArray(u) ? u : [])
