/**
 * audit judges the invariants on its own listing: a violation counts only when its pods, read live,
 * have been Ready since --invariant-grace before the listing began; it is listed beside the orphans
 * in the table and the JSON, and exits 4 (worse than orphans' 1). A pod Ready too recently, or
 * without a Ready condition, is counted as not judged, and said so.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { EXIT_VIOLATIONS, audit } from "../../src/programs/audit.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { memory } from "../../src/testing/layers.ts"
import { networkStatus, podObject, poolObject } from "../support/objects.ts"
import { createNad } from "../support/world.ts"

const NS = "default"
const POOLS = "kube-system"

/** A running pod listing `ip` on net1, Ready since `readyAgoMs` ago (no Ready condition when undefined). */
const runningPod = (name: string, ip: string, readyAgoMs: number | undefined) =>
  Effect.flatMap(KubeApi, (api) => {
    const pod = podObject(NS, name, { nodeName: "node-1", status: networkStatus([{ name: `${NS}/net1`, interface: "net1", ips: [ip] }]) })
    const conditions = readyAgoMs === undefined ? [] : [{ type: "Ready", status: "True", lastTransitionTime: new Date(Date.now() - readyAgoMs).toISOString() }]
    return api.create(R.Pods, NS, { ...pod, status: { phase: "Running", conditions } })
  })

/** 10.31.0.1 held for someone-else while pod a lists it (and reserves it); 10.31.0.2 an orphan of a pod that is gone. */
const world = (readyAgoMs: number | undefined) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    yield* createNad(NS, "net1", { range: "10.31.0.0/24" })
    yield* api.create(
      R.IPPools,
      POOLS,
      poolObject(POOLS, "10.31.0.0-24", "10.31.0.0/24", { "1": { id: "c1", podref: `${NS}/someone-else`, ifname: "net1" }, "2": { id: "c2", podref: `${NS}/gone`, ifname: "net1" } })
    )
    for (const [name, podref] of [["10.31.0.1", "a"], ["10.31.0.2", "gone"]] as const) {
      yield* api.create(R.OverlappingRangeIPReservations, POOLS, { metadata: { name, namespace: POOLS }, spec: { podref: `${NS}/${podref}` } })
    }
    yield* runningPod("a", "10.31.0.1", readyAgoMs)
  })

interface Report {
  readonly invariantViolations: ReadonlyArray<Record<string, unknown>>
  readonly invariantViolationsNotJudged: number
  readonly orphanedAllocations: ReadonlyArray<{ readonly ip: string }>
}

describe("audit: the invariants", () => {
  it.live("a pod Ready for longer than the grace whose entry names another podref: listed beside the orphans, exit code 4", () =>
    Effect.gen(function* () {
      yield* world(120_000)
      const table = yield* audit("table")
      expect(table.exitCode).toBe(EXIT_VIOLATIONS)
      expect(table.text).toContain("Invariant violations (running pods whose addresses are at risk")
      expect(table.text).toMatch(/^KIND\s+IP\s+PODS\s+POOL\s+RESERVATION\s+NAMES$/m)
      expect(table.text).toMatch(/^held-for-another\s+10\.31\.0\.1\s+default\/a\s+10\.31\.0\.0-24\s+10\.31\.0\.1\s+default\/someone-else$/m)
      expect(table.text).toMatch(/10\.31\.0\.0-24\s+10\.31\.0\.2\s+2\s+default\/gone/)
      const json = yield* audit("json")
      expect(json.exitCode).toBe(EXIT_VIOLATIONS)
      const report = JSON.parse(json.text) as Report
      expect(report.invariantViolations).toEqual([
        {
          kind: "held-for-another",
          ip: "10.31.0.1",
          pods: ["default/a"],
          pools: ["10.31.0.0-24"],
          reservation: "10.31.0.1",
          names: "default/someone-else",
          message: "IP address 10.31.0.1 that pod default/a lists on network default/net1 is allocated to default/someone-else in IPPool 10.31.0.0-24"
        }
      ])
      expect(report.invariantViolationsNotJudged).toBe(0)
      expect(report.orphanedAllocations.map((o) => o.ip)).toEqual(["10.31.0.2"])
    }).pipe(Effect.provide(memory({ namespace: POOLS }))))

  it.live("a pod Ready for less than the grace, or without a Ready condition, is not judged: counted and said, the exit code the orphans'", () =>
    Effect.gen(function* () {
      for (const readyAgo of [10_000, undefined]) {
        const table = yield* Effect.provide(Effect.zipRight(world(readyAgo), audit("table")), memory({ namespace: POOLS }))
        expect(table.exitCode, String(readyAgo)).toBe(1)
        expect(table.text).toContain("No invariant violations.")
        expect(table.text).toContain("(1 more in the listing involve pods not Ready for --invariant-grace, or changed since: run audit again to judge them)")
      }
      const json = JSON.parse((yield* Effect.provide(Effect.zipRight(world(10_000), audit("json")), memory({ namespace: POOLS }))).text) as Report
      expect(json.invariantViolations).toEqual([])
      expect(json.invariantViolationsNotJudged).toBe(1)
    }))

  it.live("a healthy cluster: no violation, nothing not judged", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      yield* createNad(NS, "net1", { range: "10.32.0.0/24" })
      yield* api.create(R.IPPools, POOLS, poolObject(POOLS, "10.32.0.0-24", "10.32.0.0/24", { "1": { id: "c1", podref: `${NS}/a`, ifname: "net1" } }))
      yield* api.create(R.OverlappingRangeIPReservations, POOLS, { metadata: { name: "10.32.0.1", namespace: POOLS }, spec: { podref: `${NS}/a` } })
      yield* runningPod("a", "10.32.0.1", 120_000)
      const table = yield* audit("table")
      expect(table.exitCode).toBe(0)
      expect(table.text).toContain("No invariant violations.")
      expect(table.text).not.toContain("more in the listing")
    }).pipe(Effect.provide(memory({ namespace: POOLS }))))
})
