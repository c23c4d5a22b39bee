import { createServer } from "node:net"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { audit } from "../../src/programs/audit.ts"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { serveEndpoints } from "../../src/programs/http.ts"
import { memory } from "../../src/testing/layers.ts"
import { metric } from "../../src/testing/prom.ts"
import { monitorPoolUsage, poolNearlyFullMessage } from "../../src/programs/pool-usage.ts"
import { Metrics } from "../../src/services/Metrics.ts"
import * as MetricsModule from "../../src/services/Metrics.ts"
import { freePort as drawPort } from "../live/cluster.ts"
import { eventually } from "../support/eventually.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { on, podObject, poolObject } from "../support/objects.ts"
import { cachesCaughtUp, createNad, eventsIn } from "../support/world.ts"

/** A loopback port drawn as the live tier draws its own (below the ephemeral range, never twice in a row). */
const freePort = () => Effect.promise(drawPort)


describe("HTTP endpoints", () => {
  it.scopedLive("/healthz, /readyz follows the informers, /metrics is Prometheus text", () =>
    Effect.gen(function* () {
      const [health, metricsPort] = [yield* freePort(), yield* freePort()]
      yield* Effect.gen(function* () {
        let ready = false
        yield* serveEndpoints(Effect.sync(() => ready))
        const get = (port: number, path: string) =>
          Effect.promise(async () => {
            const r = await fetch(`http://127.0.0.1:${port}${path}`)
            return { status: r.status, body: await r.text(), type: r.headers.get("content-type") }
          })
        expect((yield* get(health, "/healthz")).status).toBe(200)
        expect((yield* get(health, "/readyz")).status).toBe(503)
        ready = true
        expect(yield* get(health, "/readyz")).toMatchObject({ status: 200, body: "ok\n" })
        const metrics = yield* Metrics
        yield* metrics.ipsFreed("deletion", 3)
        const m = yield* get(metricsPort, "/metrics")
        expect(m.type).toContain("text/plain")
        expect(m.body).toContain('whereabouts_controller_ips_freed_total{trigger="deletion"} 3')
        expect((yield* get(health, "/nope")).status).toBe(404)
      }).pipe(Effect.provide(memory({ healthPort: health, metricsPort })))
    }))
})

describe("HTTP endpoints that cannot listen", () => {
  it.scopedLive("a port another process listens on fails with one line naming the option, not Node's EADDRINUSE", () =>
    Effect.gen(function* () {
      const [health, metricsPort] = [yield* freePort(), yield* freePort()]
      yield* Effect.acquireRelease(
        Effect.async<ReturnType<typeof createServer>>((resume) => {
          const taken = createServer()
          taken.listen(metricsPort, "127.0.0.1", () => resume(Effect.succeed(taken)))
        }),
        (taken) => Effect.async<void>((resume) => void taken.close(() => resume(Effect.void)))
      )
      const error = yield* Effect.flip(serveEndpoints(Effect.succeed(true)).pipe(Effect.provide(memory({ healthPort: health, metricsPort }))))
      expect(error.message).toBe(
        `--metrics-port (METRICS_PORT) ${metricsPort}: port ${metricsPort} is already in use (another process listens there); choose a free port, or 0 to turn this endpoint off`
      )
    }))
})

/** Whether this host can listen on IPv6 loopback (the test below needs it for its IPv6 half). */
const hostHasIPv6 = await new Promise<boolean>((resolve) => {
  const s = createServer()
  s.once("error", () => resolve(false))
  s.listen(0, "::1", () => s.close(() => resolve(true)))
})

describe("HTTP endpoints on every address", () => {
  const answers = (hosts: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const [health, metricsPort] = [yield* freePort(), yield* freePort()]
      return yield* Effect.gen(function* () {
        yield* serveEndpoints(Effect.succeed(true))
        const status = (host: string, port: number, path: string) =>
          Effect.promise(async () => (await fetch(`http://${host}:${port}${path}`)).status)
        const out: Array<number> = []
        for (const host of hosts) out.push(yield* status(host, health, "/readyz"), yield* status(host, metricsPort, "/metrics"))
        return out
      }).pipe(Effect.provide(memory({ healthPort: health, metricsPort })))
    })

  it.scopedLive("answer on IPv4 loopback", () =>
    Effect.map(answers(["127.0.0.1"]), (statuses) => expect(statuses).toEqual([200, 200])))

  // The kubelet probes the pod IP: in an IPv6-only cluster that is IPv6 (0.0.0.0 never answered it).
  // it.skipIf is vitest's and knows no Effect: the test runs the scoped Effect itself.
  it.skipIf(!hostHasIPv6)("answer on IPv6 loopback (hosts with IPv6)", async () => {
    expect(await Effect.runPromise(Effect.scoped(answers(["[::1]"])))).toEqual([200, 200])
  })
})

describe("process metrics", () => {
  it.effect("the deployed process's registry adds the runtime collectors; the default one stays ours only", () =>
    Effect.gen(function* () {
      const withProcess = yield* MetricsModule.make({ processMetrics: true }).render
      expect(withProcess.body).toMatch(/^process_resident_memory_bytes \d/m)
      expect(withProcess.body).toMatch(/^nodejs_heap_size_used_bytes \d/m)
      expect(withProcess.body).toContain("whereabouts_controller_ips_freed_total")
      const plain = yield* MetricsModule.make().render
      expect(plain.body).not.toContain("process_resident_memory_bytes")
    }))
})

describe("pool usage", () => {
  it.scopedLive("gauges per pool, and one Warning on the IPPool when it crosses the threshold", () =>
    Effect.gen(function* () {
      yield* createNad("default", "small", { range: "10.60.0.0/29" }) // 6 usable
      for (let i = 0; i < 5; i++) yield* startPod("default", `p${i}`, [on("small")])
      yield* cachesCaughtUp
      yield* Effect.forkScoped(monitorPoolUsage(Schedule.spaced("20 millis")))
      yield* eventually(Effect.flatMap(metric("pool_used", { pool: "10.60.0.0-29" }), (v) => (v === 5 ? Effect.void : Effect.fail("not yet"))))
      expect(yield* metric("pool_size", { pool: "10.60.0.0-29" })).toBe(6)
      expect(yield* metric("pool_free", { pool: "10.60.0.0-29" })).toBe(1)
      expect(yield* metric("pool_usage_over_threshold", { pool: "10.60.0.0-29" })).toBe(0)
      yield* startPod("default", "p5", [on("small")])
      yield* eventually(Effect.flatMap(eventsIn("kube-system"), (e) => (e.length === 1 ? Effect.void : Effect.fail("no event"))))
      yield* Effect.sleep("100 millis")
      const events = yield* eventsIn("kube-system")
      expect(events).toEqual([
        expect.objectContaining({ type: "Warning", reason: "IPPoolNearlyFull", message: poolNearlyFullMessage("10.60.0.0-29", 6, 6, 0.9), name: "10.60.0.0-29", count: 1 })
      ])
      expect(events[0]!.message).toBe("IPPool 10.60.0.0-29 is 100% used (6 of 6 addresses), at or over the 90% threshold")
      expect(yield* metric("pool_usage_over_threshold", { pool: "10.60.0.0-29" })).toBe(1)
    }).pipe(Effect.provide(memory())))
})

describe("pool usage, idle", () => {
  it.scopedLive("while no pool, NAD or node-slice pool changes, nothing is computed again; a NAD's change is read at the next check", () =>
    Effect.gen(function* () {
      // 10.65.0.0/28 (14 usable) limited to .1-.4 by the NAD: four.
      yield* createNad("default", "idle", { range: "10.65.0.0/28", range_end: "10.65.0.4" })
      for (let i = 0; i < 2; i++) yield* startPod("default", `i${i}`, [on("idle")])
      yield* cachesCaughtUp
      const metrics = yield* Metrics
      let computed = 0
      const counting = { ...metrics, pools: (...a: Parameters<typeof metrics.pools>) => Effect.zipRight(Effect.sync(() => void computed++), metrics.pools(...a)) }
      yield* Effect.forkScoped(Effect.provideService(monitorPoolUsage(Schedule.spaced("20 millis")), Metrics, counting))
      const sizeIs = (n: number) => eventually(Effect.flatMap(metric("pool_size", { pool: "10.65.0.0-28" }), (v) => (v === n ? Effect.void : Effect.fail(`pool_size ${v}`))))
      yield* sizeIs(4)
      const before = computed
      yield* Effect.sleep("200 millis")
      expect(computed).toBe(before)
      // Without its NAD the pool is sized by its range.
      yield* Effect.flatMap(KubeApi, (api) => api.delete(R.NetworkAttachmentDefinitions, "default", "idle"))
      yield* sizeIs(14)
      expect(computed).toBe(before + 1)
    }).pipe(Effect.provide(memory())))
})

describe("pool capacity from the IPAM config", () => {
  it.scopedLive("range_start/range_end and exclude size the pool (a /28 limited to ten reads as ten); the alert fires when those are used up", () =>
    Effect.gen(function* () {
      // 10.63.0.0/28: 14 usable; range .1-.12 minus the excluded .4-.5 = ten.
      yield* createNad("default", "narrow", { range: "10.63.0.0/28", range_start: "10.63.0.1", range_end: "10.63.0.12", exclude: ["10.63.0.4/31"] })
      // range_start = range_end: one address.
      yield* createNad("default", "single", { range: "10.64.0.0/24", range_start: "10.64.0.7", range_end: "10.64.0.7" })
      for (let i = 0; i < 8; i++) yield* startPod("default", `n${i}`, [on("narrow")])
      yield* startPod("default", "s0", [on("single")])
      yield* cachesCaughtUp
      yield* Effect.forkScoped(monitorPoolUsage(Schedule.spaced("20 millis")))
      yield* eventually(Effect.flatMap(metric("pool_used", { pool: "10.63.0.0-28" }), (v) => (v === 8 ? Effect.void : Effect.fail("not yet"))))
      expect(yield* metric("pool_size", { pool: "10.63.0.0-28" })).toBe(10)
      expect(yield* metric("pool_free", { pool: "10.63.0.0-28" })).toBe(2)
      expect(yield* metric("pool_size", { pool: "10.64.0.0-24" })).toBe(1)
      expect(yield* metric("pool_free", { pool: "10.64.0.0-24" })).toBe(0)
      expect(yield* metric("pool_usage_over_threshold", { pool: "10.64.0.0-24" })).toBe(1)
      yield* startPod("default", "n8", [on("narrow")])
      yield* eventually(
        Effect.flatMap(eventsIn("kube-system"), (e) => (e.some((x) => x.name === "10.63.0.0-28") ? Effect.void : Effect.fail("no event")))
      )
      expect((yield* eventsIn("kube-system")).find((e) => e.name === "10.63.0.0-28")!.message).toBe(
        "IPPool 10.63.0.0-28 is 90% used (9 of 10 addresses), at or over the 90% threshold"
      )
      const report = JSON.parse((yield* audit("json")).text) as { pools: Array<{ name: string; size: number; sizeFrom: string }> }
      expect(report.pools.map((p) => [p.name, p.size, p.sizeFrom])).toEqual([
        ["10.63.0.0-28", 10, "config"],
        ["10.64.0.0-24", 1, "config"]
      ])
    }).pipe(Effect.provide(memory())))

  it.live("a pool no NAD writes any more is sized by its range, and audit says so", () =>
    Effect.gen(function* () {
      yield* Effect.flatMap(KubeApi, (k) => k.create(R.IPPools, "kube-system", poolObject("kube-system", "10.65.0.0-28", "10.65.0.0/28", {})))
      const report = yield* audit("table")
      expect(report.text).toMatch(/10\.65\.0\.0-28\s+10\.65\.0\.0\/28\s+-\s+14\s+0\s+14\s+0\.0%\s+0\s+range only/)
    }).pipe(Effect.provide(memory())))
})

describe("audit", () => {
  it.live("lists pools and orphans with reasons; exit code 1 with orphans, 0 without; frees nothing", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.61.0.0/24" })
      const keep = yield* startPod("default", "keep", [on("net1")])
      const gone = yield* startPod("default", "gone", [on("net1")])
      yield* deletePod(gone)
      const table = yield* audit("table")
      expect(table.exitCode).toBe(1)
      expect(table.text).toMatch(/POOL\s+RANGE\s+NETWORK\s+SIZE\s+USED\s+FREE\s+USED%\s+ORPHANS/)
      expect(table.text).toMatch(/10\.61\.0\.0-24\s+10\.61\.0\.0\/24\s+-\s+254\s+2\s+252\s+0\.8%\s+1/)
      expect(table.text).toMatch(/10\.61\.0\.0-24\s+10\.61\.0\.2\s+2\s+default\/gone\s+net1\s+no live pod has this podref/)
      const json = JSON.parse((yield* audit("json")).text) as { orphanedAllocations: Array<{ ip: string; reason: string }>; orphanedReservations: Array<{ name: string }> }
      expect(json.orphanedAllocations).toEqual([expect.objectContaining({ ip: "10.61.0.2", podref: "default/gone", reason: "PodGone" })])
      expect(json.orphanedReservations.map((r) => r.name)).toEqual(["10.61.0.2"])
      // Nothing was freed: the audit is a dry run.
      expect((yield* audit("json")).exitCode).toBe(1)
      expect(keep.ips[0]!.ips).toEqual(["10.61.0.1"])
    }).pipe(Effect.provide(memory())))

  it.live("lists the bad input it met (an unreadable NAD config, unparsable pool entries, a pod's unreadable Multus annotation), in the table and the JSON; bad input alone exits 0", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      yield* createNad("default", "net1", { range: "10.67.0.0/24" })
      yield* createNad("default", "broken", "{not json")
      // Not bad input: a NAD of another IPAM, one without any, one whose config lives on the nodes.
      yield* createNad("default", "dhcp", JSON.stringify({ cniVersion: "0.3.1", name: "dhcp", type: "macvlan", ipam: { type: "dhcp" } }))
      yield* createNad("default", "plain", JSON.stringify({ cniVersion: "0.3.1", name: "plain", type: "bridge" }))
      yield* createNad("default", "on-disk", "")
      yield* api.create(R.IPPools, "kube-system", poolObject("kube-system", "10.66.0.0-24", "10.66.0.0/24", { abc: { id: "x", podref: "default/junk" }, "-1": { id: "y", podref: "default/junk" } }))
      yield* api.create(R.Pods, "default", podObject("default", "odd", { status: "[{not json", nodeName: "node-1" }))
      yield* startPod("default", "fine", [on("net1")])
      const table = yield* audit("table")
      expect(table.exitCode).toBe(0)
      const json = JSON.parse((yield* audit("json")).text) as { badInput: { nads: Array<Record<string, string>>; poolEntries: Array<Record<string, string>>; pods: Array<Record<string, string>> } }
      expect(json.badInput.nads).toEqual([{ namespace: "default", name: "broken", why: expect.stringContaining("JSON") }])
      expect(json.badInput.poolEntries).toEqual([
        { pool: "10.66.0.0-24", key: "abc", reason: "offset is not a non-negative decimal integer" },
        { pool: "10.66.0.0-24", key: "-1", reason: "offset is not a non-negative decimal integer" }
      ])
      expect(json.badInput.pods).toEqual([{ namespace: "default", name: "odd", annotation: "k8s.v1.cni.cncf.io/network-status", why: expect.any(String) }])
      expect(table.text).toContain("NADs whose config cannot be read:")
      expect(table.text).toMatch(/^default\/broken\s+\S/m)
      expect(table.text).toMatch(/^10\.66\.0\.0-24\s+abc\s+offset is not a non-negative decimal integer$/m)
      expect(table.text).toMatch(/^default\/odd\s+k8s\.v1\.cni\.cncf\.io\/network-status\s+\S/m)
      expect(table.text).not.toContain("default/dhcp")
      expect(table.text).not.toContain("default/plain")
      expect(table.text).not.toContain("default/on-disk")
    }).pipe(Effect.provide(memory())))

  it.live("a clean cluster audits to exit code 0", () =>
    Effect.gen(function* () {
      yield* createNad("default", "net1", { range: "10.62.0.0/24" })
      yield* startPod("default", "a", [on("net1")])
      const out = yield* audit("table")
      expect(out.exitCode).toBe(0)
      expect(out.text).toContain("No orphaned allocations.")
      expect(out.text).toContain("No orphaned reservations.")
      expect(out.text).toContain("No bad input.")
      expect(JSON.parse((yield* audit("json")).text)).toMatchObject({ badInput: { nads: [], poolEntries: [], pods: [] } })
    }).pipe(Effect.provide(memory())))
})

