/** The kinds of work the controller's API requests are bounded by (src/services/ApiFlow.ts), and their bounds. */
export const FLOW_KINDS = ["pool-writes", "reservations", "pod-reads", "events", "lists", "leader-election", "other"] as const
export type FlowKind = (typeof FLOW_KINDS)[number]

/** Requests in flight at once, per kind, on a shared API server (BENCHMARKS.md's Decisions); --api-qps caps the rate. */
export const DEFAULT_IN_FLIGHT: Readonly<Record<FlowKind, number>> = {
  "pool-writes": 8,
  reservations: 32,
  "pod-reads": 32,
  events: 8,
  lists: 4,
  "leader-election": 2,
  other: 16
}

/**
 * Kinds that give way to others on a busy server: while a kind they yield to has had a request in
 * flight within the last YIELD_HOLD_MS, at most YIELDING_IN_FLIGHT requests of theirs are in
 * flight, whatever their own bound. Events give way to the writes that free addresses: both take
 * the API server's CPU, and the frees are what a waiting pod needs (BENCHMARKS.md's Decisions).
 */
export const YIELDS_TO: Readonly<Partial<Record<FlowKind, ReadonlyArray<FlowKind>>>> = { events: ["pool-writes", "reservations"] }
/** Requests of a yielding kind in flight at once while it gives way. */
export const YIELDING_IN_FLIGHT = 1
/** How long after its last request a kind still counts as busy (a deletion batch gathers for up to a second between writes). */
export const YIELD_HOLD_MS = 1_000
