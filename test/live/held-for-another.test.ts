/**
 * Rule 0 on a real API server with the upstream plugin (issue #48): a running pod `mon-a` holds an
 * address; its pool entry's podref is edited by hand to a pod that does not exist (the shape a
 * manual edit, a restore or upstream #176 leaves). Before rule 0 the start-up sweep freed the entry
 * as an orphan and the next ADD handed mon-a's address to a new pod: a duplicate made by the
 * garbage collector. Now every path keeps it and says whom it is held for: the start-up sweep,
 * audit, the deletion of a pod of the name the entry carries, and release without --force.
 * With overlapping ranges on and off (with them off there is no reservation to protect it).
 */
import { afterAll, beforeAll, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import type { RunningPod } from "../../src/testing/cni-plugin.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { describeWithPlugin, pluginBinary, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { runCommand, stopAllControllers } from "./support/controller-process.ts"
import { awaitLeading, awaitMetric, launch, logsWith, metricOf } from "./support/controller.ts"
import { PluginNode, pluginNode, startPod } from "./support/upstream-plugin.ts"
import { type LiveWorld, createNad, ensureNamespace, eventLines, liveWorld, on, poolEntries, reservationSpecs, setPhase, waitForEqual, waitUntil } from "./support/world.ts"

const HELD = "kept an address another live pod lists: held for another"

describeWithPlugin("rule 0: an address a running pod lists is never freed, whichever podref its entry names", () => {
  const POOLS = uniqueNamespace("held-pools")
  const kubeconfig = () => runningEnvtest().kubeconfigPath
  const world = <A, E>(body: Effect.Effect<A, E, LiveWorld | PluginNode>) =>
    body.pipe(Effect.provide(Layer.merge(liveWorld(POOLS), pluginNode({ binary: pluginBinary(), kubeconfig: kubeconfig(), namespace: POOLS }))))
  const command = (name: string, args: ReadonlyArray<string>) => Effect.promise(() => runCommand(name, { kubeconfig: kubeconfig(), namespace: POOLS, args }))

  beforeAll(() => Effect.runPromise(world(ensureNamespace(POOLS))), 60_000)
  afterAll(() => stopAllControllers(), 60_000)

  for (const [overlapping, subnet] of [[true, 228], [false, 229]] as const) {
    it.live(`overlapping ranges ${overlapping ? "on" : "off"}: kept by the start-up sweep, audit, a deletion of that name and release; freed only by release --force`, () =>
      world(
        Effect.gen(function* () {
          const ns = uniqueNamespace(`held-${overlapping ? "on" : "off"}`)
          const [range, pool, address] = [`10.${subnet}.0.0/28`, `10.${subnet}.0.0-28`, `10.${subnet}.0.1`]
          yield* ensureNamespace(ns)
          yield* createNad(ns, "net", { range, enable_overlapping_ranges: overlapping })
          const mon = yield* startPod(ns, "mon-a", [on(`${ns}/net`)])
          yield* setPhase(ns, "mon-a", "Running")
          expect(mon.ips.map((i) => i.ips)).toEqual([[address]])
          // The hand edit: mon-a's entry now names a pod that does not exist.
          const other = `${ns}/someone-else`
          yield* Effect.flatMap(PluginStore, (w) => w.updatePool(pool, (a) => Either.right({ ...a, "1": { ...a["1"]!, podref: other } })))
          const edited = { [address]: { podref: other, id: mon.containerId, ifname: "net1" } }
          const reservations = overlapping ? { [address]: { podref: `${ns}/mon-a`, ifname: "net1" } } : {}
          expect(yield* poolEntries(pool)).toEqual(edited)

          // audit: not an orphan, held for another.
          const audited = yield* command("audit", ["-o", "json"])
          const report = JSON.parse(audited.stdout) as { orphanedAllocations: ReadonlyArray<{ pool: string }>; heldForAnother: ReadonlyArray<Record<string, unknown>> }
          expect(report.orphanedAllocations.filter((o) => o.pool === pool)).toEqual([])
          expect(report.heldForAnother.filter((h) => h["name"] === pool)).toEqual([{ kind: "allocation", name: pool, ip: address, podref: other, listedBy: [`${ns}/mon-a`] }])

          // The start-up sweep keeps it and says so.
          const c = yield* launch({ kubeconfig: kubeconfig(), namespace: POOLS, identity: `held-${Date.now().toString(36)}` })
          yield* awaitLeading(c)
          expect(logsWith(c, HELD).filter((l) => l.raw.includes(pool) || l.raw.includes(address))).not.toEqual([])
          expect(yield* poolEntries(pool)).toEqual(edited)
          expect(yield* reservationSpecs(`10.${subnet}.`)).toEqual(reservations)

          // The next ADD does not get mon-a's address.
          const next: RunningPod = yield* startPod(ns, "new-b", [on(`${ns}/net`)])
          expect(next.ips.map((i) => i.ips)).toEqual([[`10.${subnet}.0.2`]])

          // A pod of the name the entry carries is created and deleted: the deletion path keeps it too.
          const api = yield* KubeApi
          const taken = Effect.map(metricOf(c, "whereabouts_controller_workqueue_queue_duration_seconds_count"), (n) => n ?? 0)
          const before = yield* taken
          yield* api.create(R.Pods, ns, { metadata: { name: "someone-else", namespace: ns }, spec: { nodeName: "node-1", containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }] } })
          yield* api.delete(R.Pods, ns, "someone-else", { gracePeriodSeconds: 0 })
          yield* awaitMetric(c, "whereabouts_controller_workqueue_queue_duration_seconds_count", {}, (n) => (n ?? 0) >= before + 1)
          yield* waitUntil(
            "the deletion path's outcome for someone-else",
            Effect.sync(() => c.logs().filter((l) => l.message.startsWith("kept addresses of") && l.raw.includes(other))),
            (lines) => lines.length > 0,
            { context: () => c.tail() }
          )
          expect((yield* poolEntries(pool))[address]).toEqual(edited[address])
          expect(yield* eventLines(ns, (e) => e.reason === "IPAddressGarbageCollected")).toEqual([])

          // release without --force refuses; with it, the operator frees it on purpose.
          const refused = yield* command("release", ["--pod", other, "-o", "json"])
          expect(refused.stdout).toContain("held for another")
          expect(refused.code).toBe(1)
          expect((yield* poolEntries(pool))[address]).toEqual(edited[address])
          const forced = yield* command("release", ["--pod", other, "--force"])
          expect(forced.code).toBe(0)
          yield* waitForEqual("only --force freed it", Effect.map(poolEntries(pool), (p) => Object.keys(p)), [`10.${subnet}.0.2`])
          yield* Effect.promise(() => c.stop())
        })
      ), 180_000)
  }
})
