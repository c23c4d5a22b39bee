/**
 * Prometheus metrics through prom-client, one registry per layer instance so tests read their own
 * numbers. Callers use the typed methods; only `render` knows about text formats.
 */
import { Context, Effect, Layer } from "effect"
import * as prom from "prom-client"
import { FLOW_KINDS } from "../domain/api-flow.ts"
import { atOrOver } from "../domain/capacity.ts"
import type { InvariantKind } from "../domain/invariants.ts"
import { FREE_TRIGGERS, type FreeTrigger } from "../domain/release.ts"

export type { FreeTrigger }

export interface PoolUsage {
  readonly pool: string
  readonly size: number
  readonly used: number
  /** Addresses the pool can still hand out. */
  readonly free: number
}

/** The service (make's methods): one per metric, or per pair observed together, plus the exposition. */
export type MetricsShape = ReturnType<typeof make>

export class Metrics extends Context.Tag("whereabouts-controller/Metrics")<Metrics, MetricsShape>() {}

const P = "whereabouts_controller_"

/** One series per label value, at 0. */
const atZero = (counters: ReadonlyArray<prom.Counter>, label: string, values: ReadonlyArray<string>) => {
  for (const c of counters) for (const v of values) c.inc({ [label]: v }, 0)
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** What a scrape reads from its owner, rather than a loop keeping a series current: set while the owner runs. */
interface ReadAtScrape {
  queue?: Effect.Effect<readonly [depth: number, inFlight: number]> | undefined
  informers: ReadonlyArray<{ readonly resource: { readonly plural: string }; readonly restarts: () => number }>
}

/** Every metric of ours, registered in `registry`. */
const declare = (registry: prom.Registry, read: ReadAtScrape) => {
  const counter = (name: string, help: string, labelNames: ReadonlyArray<string> = [], collect?: (this: prom.Counter) => void) =>
    new prom.Counter({ name: P + name, help, labelNames, registers: [registry], ...(collect === undefined ? {} : { collect }) })
  const gauge = (name: string, help: string, labelNames: ReadonlyArray<string> = [], collect?: (this: prom.Gauge) => void) =>
    new prom.Gauge({ name: P + name, help, labelNames, registers: [registry], ...(collect === undefined ? {} : { collect }) })
  const queue = () => (read.queue === undefined ? [0, 0] as const : Effect.runSync(read.queue))
  const histogram = (name: string, help: string, buckets: Array<number>, labelNames: ReadonlyArray<string> = []) =>
    new prom.Histogram({ name: P + name, help, labelNames, buckets, registers: [registry] })
  return {
    freed: counter("ips_freed_total", "IP allocations freed, by what found them.", ["trigger"]),
    reservations: counter("reservations_deleted_total", "OverlappingRangeIPReservations deleted.", ["trigger"]),
    failures: counter("failures_total", "Failures to free a pod's addresses, and bad input met, by reason.", ["reason"]),
    duration: histogram("free_batch_duration_seconds", "Duration of freeing one batch of deleted pods (and pods that will never run again).", LATENCY_BUCKETS),
    // The same observations under the name of the releases before: removed in the next release.
    durationDeprecated: histogram("reconcile_duration_seconds", "Deprecated: free_batch_duration_seconds, under its former name; removed in the next release.", LATENCY_BUCKETS),
    waited: histogram(
      "workqueue_queue_duration_seconds",
      "How long a deleted pod waited in the work queue before a worker took it (first attempt).",
      [0.001, ...LATENCY_BUCKETS]
    ),
    depth: gauge("workqueue_depth", "Deleted pods waiting in the work queue.", [], function () {
      this.set(queue()[0])
    }),
    inFlight: gauge("workqueue_in_flight", "Deleted pods being freed.", [], function () {
      this.set(queue()[1])
    }),
    retries: counter("workqueue_retries_total", "Rate-limited requeues after retryable failures."),
    api: counter("api_requests_total", "Kubernetes API requests, by verb, resource and HTTP code.", ["verb", "resource", "code"]),
    apiDuration: histogram(
      "api_request_duration_seconds",
      "Kubernetes API request latency (watches excluded), by verb and resource; includes any wait for the client rate limiter.",
      LATENCY_BUCKETS,
      ["verb", "resource"]
    ),
    events: counter("events_total", "Kubernetes Events: recorded into the queue (queued), written, failed, dropped (queue full or shutdown).", ["result"]),
    eventQueue: gauge("event_queue_depth", "Distinct Events waiting to be written."),
    apiInFlight: gauge("api_in_flight", "Kubernetes API requests in flight, by kind of work (each kind bounded).", ["kind"]),
    apiPauses: counter("api_pauses_total", "Times a 429 with Retry-After paused a kind of work.", ["kind"]),
    apiPausedSeconds: counter("api_paused_seconds_total", "Seconds of pause the API server's Retry-After asked for, by kind of work.", ["kind"]),
    leader: gauge("leader", "1 while this instance holds the leader lease."),
    poolSize: gauge("pool_size", "Addresses a pool can hand out: from the IPAM configs of the NADs that write it, else from its range.", ["pool"]),
    poolUsed: gauge("pool_used", "Allocations in a pool.", ["pool"]),
    poolFree: gauge("pool_free", "Addresses a pool can still hand out.", ["pool"]),
    poolOver: gauge("pool_usage_over_threshold", "1 when a pool's usage is at or over the threshold.", ["pool"]),
    orphans: gauge("orphans", "Orphans found by the last sweep (in dry-run: what would be freed).", ["kind", "dry_run"]),
    sweeps: counter("sweeps_total", "Full orphan sweeps, by result.", ["result"]),
    violations: gauge("invariant_violations", "Invariant violations reported now (past their grace), by kind.", ["kind"]),
    restarts: counter("informer_restarts_total", "Informer restarts after errors.", ["resource"], function () {
      // An informer counts its own restarts, for the life of the process: the counter is that count.
      this.reset()
      for (const { resource, restarts } of read.informers) this.inc({ resource: resource.plural }, restarts())
    })
  }
}

/**
 * The series alerts and the dashboard read exist from the start, at 0: increase() and rate() count
 * an increment only against an earlier sample, so a series born at 1 hides its first event (the
 * first give-up, the first failed sweep). informer_restarts_total's come with the informers (informersAtScrape).
 */
const seriesAtZero = (m: ReturnType<typeof declare>) => {
  atZero([m.freed, m.reservations], "trigger", FREE_TRIGGERS)
  atZero([m.failures], "reason", ["RetriesExhausted"])
  atZero([m.events], "result", ["queued", "written", "failed", "dropped"])
  atZero([m.sweeps], "result", ["success", "failure"])
  atZero([m.apiPauses, m.apiPausedSeconds], "kind", FLOW_KINDS)
}

/**
 * How often the event-loop lag (nodejs_eventloop_lag_*) is sampled, ms. prom-client's 10 ms wakes an
 * idle controller a hundred times a second, which then costs more CPU than its own work.
 */
const EVENT_LOOP_SAMPLE_MS = 100

/**
 * `processMetrics`: also prom-client's default collectors (process_resident_memory_bytes, CPU,
 * open fds, nodejs_heap_*, event-loop lag, GC) — for the deployed process only, since they start
 * timers and GC observers that tests do not want one of per layer.
 */
export const make = (options: { readonly processMetrics?: boolean } = {}) => {
  const registry = new prom.Registry()
  if (options.processMetrics === true) prom.collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS })
  const read: ReadAtScrape = { informers: [] }
  const m = declare(registry, read)
  seriesAtZero(m)
  const poolGauges = [m.poolSize, m.poolUsed, m.poolFree, m.poolOver]

  return {
    ipsFreed: (trigger: FreeTrigger, n: number) => Effect.sync(() => m.freed.inc({ trigger }, n)),
    reservationsDeleted: (trigger: FreeTrigger, n: number) => Effect.sync(() => m.reservations.inc({ trigger }, n)),
    failure: (reason: string) => Effect.sync(() => m.failures.inc({ reason })),
    /** One batch of pods freed, from its first read to its last write (its Events only queued). */
    freeBatchDuration: (seconds: number) =>
      Effect.sync(() => {
        m.duration.observe(seconds)
        m.durationDeprecated.observe(seconds)
      }),
    /** The work queue's depth and keys in flight, read at each scrape while the scope (the deletion loop's) lasts; 0 after. */
    queueAtScrape: (depthAndInFlight: Effect.Effect<readonly [number, number]>) =>
      Effect.acquireRelease(Effect.sync(() => void (read.queue = depthAndInFlight)), () => Effect.sync(() => void (read.queue = undefined))),
    /** Each informer's restarts so far, read at each scrape into informer_restarts_total. */
    informersAtScrape: (informers: ReadAtScrape["informers"]) => Effect.sync(() => void (read.informers = informers)),
    retry: () => Effect.sync(() => m.retries.inc()),
    /** One request; `seconds` (not for watches) from the call to the answer, any wait for the client rate limiter included. */
    apiRequest: (verb: string, resource: string, code: string, seconds?: number) =>
      Effect.sync(() => {
        m.api.inc({ verb, resource, code })
        if (seconds !== undefined) m.apiDuration.observe({ verb, resource }, seconds)
      }),
    /** Events recorded into the queue, written, failed or dropped (EventRecorder.ts). */
    events: (result: "queued" | "written" | "failed" | "dropped", n: number) => Effect.sync(() => m.events.inc({ result }, n)),
    /** Distinct Events waiting in the queue. */
    eventQueue: (depth: number) => Effect.sync(() => m.eventQueue.set(depth)),
    /** API requests in flight of one kind of work (ApiFlow.ts). */
    apiInFlight: (kind: string, n: number) => Effect.sync(() => m.apiInFlight.set({ kind }, n)),
    /** A 429 with Retry-After paused one kind of work for that many seconds. */
    apiPaused: (kind: string, seconds: number) =>
      Effect.sync(() => {
        m.apiPauses.inc({ kind })
        m.apiPausedSeconds.inc({ kind }, seconds)
      }),
    /** How long a deleted pod waited in the work queue, from its deletion event to a worker taking it (first attempt). */
    queueWait: (seconds: number) => Effect.sync(() => m.waited.observe(seconds)),
    leader: (is: boolean) =>
      Effect.sync(() => {
        m.leader.set(is ? 1 : 0)
        // What only the leader measures goes with the lease: a standby's last pool usage, orphan
        // and invariant counts would go stale beside the new leader's on a dashboard.
        if (!is) for (const g of [...poolGauges, m.orphans, m.violations]) g.reset()
      }),
    /** Replaces the per-pool gauges with the current set of pools. */
    pools: (usage: ReadonlyArray<PoolUsage>, threshold: number) =>
      Effect.sync(() => {
        for (const g of poolGauges) g.reset()
        for (const u of usage) {
          m.poolSize.set({ pool: u.pool }, u.size)
          m.poolUsed.set({ pool: u.pool }, u.used)
          m.poolFree.set({ pool: u.pool }, u.free)
          m.poolOver.set({ pool: u.pool }, atOrOver(u, threshold) ? 1 : 0)
        }
      }),
    orphans: (kind: "allocation" | "reservation", n: number, dryRun: boolean) => Effect.sync(() => m.orphans.set({ kind, dry_run: String(dryRun) }, n)),
    sweep: (result: "success" | "failure") => Effect.sync(() => m.sweeps.inc({ result })),
    /** The invariant violations the monitor currently reports (past their grace), per kind. */
    invariantViolations: (counts: Readonly<Record<InvariantKind, number>>) =>
      Effect.sync(() => {
        for (const [kind, n] of Object.entries(counts)) m.violations.set({ kind }, n)
      }),
    /** Prometheus text exposition. */
    render: Effect.promise(async () => ({ contentType: registry.contentType, body: await registry.metrics() }))
  }
}

export const layer: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make())

/** The deployed process's metrics: ours plus the process and Node.js runtime collectors. */
export const layerWithProcess: Layer.Layer<Metrics> = Layer.sync(Metrics, () => make({ processMetrics: true }))
