/**
 * The sweep's schedule from the ConfigMap whereabouts 0.9 keeps it in, against a real API server
 * and with deploy/'s names: created while the controller runs (taken without a restart), changed
 * to another schedule (the new one fires), changed to something that does not parse (a Warning Event on the ConfigMap, the
 * previous schedule stays), deleted (back to the default). The controller runs without
 * `--reconcile-schedule`, which would win over the ConfigMap.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { startController, stopAllControllers } from "./support/controller-process.ts"
import { TEST_TIMINGS, awaitLeading, awaitMetric, logsWith } from "./support/controller.ts"
import { ensureNamespace, eventsIn, liveWorld, poolView, waitUntil } from "./support/world.ts"

const CM = "whereabouts-config"

describeLive("the sweep's schedule from the whereabouts-config ConfigMap", () => {
  const POOLS = uniqueNamespace("sched-pools")

  it.live("created: taken without a restart; changed: the new schedule fires; garbage: a Warning on the ConfigMap, the schedule kept; deleted: the default again", () =>
    Effect.gen(function* () {
      yield* ensureNamespace(POOLS)
      const api = yield* KubeApi
      const ctl = yield* Effect.promise(() =>
        startController({ kubeconfig: runningEnvtest().kubeconfigPath, namespace: POOLS, args: [...TEST_TIMINGS] })
      )
      yield* awaitLeading(ctl, { sweep: true })
      expect(logsWith(ctl, "sweep schedule changed")).toEqual([])

      // An allocation of a pod that never existed: nothing but a sweep frees it.
      const ghost = `${uniqueNamespace("sched")}/ghost`
      const writer = yield* PluginStore
      yield* writer.createPool("10.172.0.0-24", "10.172.0.0/24")
      yield* writer.updatePool("10.172.0.0-24", () => Either.right({ "9": { id: "c0ffee", podref: ghost, ifname: "net1" } }))
      expect(yield* poolView("10.172.0.0-24")).toEqual({ "10.172.0.9": ghost })

      // Created with an hourly schedule: taken at once, and nothing fires within the test.
      const hourly = yield* api.create(R.ConfigMaps, POOLS, { metadata: { name: CM, namespace: POOLS }, data: { "cron-expression": "@every 1h" } })
      yield* waitUntil("the schedule taken from the ConfigMap", Effect.sync(() => logsWith(ctl, "sweep schedule changed", { schedule: "@every 1h" })), (l) => l.length === 1, {
        context: () => ctl.tail()
      })
      expect(logsWith(ctl, "sweep schedule changed")[0]!.annotations).toMatchObject({ source: `ConfigMap ${POOLS}/${CM} key cron-expression` })
      yield* Effect.sleep("3 seconds")
      expect(yield* poolView("10.172.0.0-24")).toEqual({ "10.172.0.9": ghost })

      // Changed to another valid schedule: the new one fires.
      const created = yield* api.replace(R.ConfigMaps, POOLS, { ...hourly, data: { "cron-expression": "@every 2s" } })
      yield* waitUntil("the changed schedule taken", Effect.sync(() => logsWith(ctl, "sweep schedule changed", { schedule: "@every 2s" })), (l) => l.length === 1, {
        context: () => ctl.tail()
      })
      yield* waitUntil("the scheduled sweep freed the orphan", poolView("10.172.0.0-24"), (v) => Object.keys(v).length === 0, { context: () => ctl.tail() })
      yield* awaitMetric(ctl, "whereabouts_controller_ips_freed_total", { trigger: "sweep" }, (v) => v === 1)
      yield* awaitMetric(ctl, "whereabouts_controller_sweeps_total", { result: "success" }, (v) => v !== undefined && v >= 3)

      yield* api.replace(R.ConfigMaps, POOLS, { ...created, data: { "cron-expression": "every two seconds" } })
      yield* waitUntil(
        "a Warning on the ConfigMap",
        Effect.map(eventsIn(POOLS), (es) => es.filter((e) => e.reason === "InvalidReconcileSchedule")),
        (es) => es.length === 1,
        { context: () => ctl.tail() }
      )
      const [warning] = (yield* eventsIn(POOLS)).filter((e) => e.reason === "InvalidReconcileSchedule")
      expect(warning).toMatchObject({ type: "Warning", kind: "ConfigMap", name: CM, uid: created.metadata.uid })
      expect(warning!.message).toMatch(new RegExp(`^ConfigMap ${POOLS}/${CM} key cron-expression: invalid cron expression "every two seconds": .+; the previous schedule stays$`))
      // Still sweeping on the previous one.
      const before = (yield* Effect.promise(() => ctl.metric("whereabouts_controller_sweeps_total", { result: "success" }))) ?? 0
      yield* awaitMetric(ctl, "whereabouts_controller_sweeps_total", { result: "success" }, (v) => v !== undefined && v > before)

      yield* api.delete(R.ConfigMaps, POOLS, CM)
      yield* waitUntil("back to the default", Effect.sync(() => logsWith(ctl, "sweep schedule changed", { schedule: "30 4 * * *", source: "default" })), (l) => l.length === 1, {
        context: () => ctl.tail()
      })
      expect(logsWith(ctl, "sweep schedule changed")).toHaveLength(3)
      expect(ctl.logs().filter((l) => /Forbidden|HTTP 403/.test(l.raw))).toEqual([])
      expect(yield* Effect.promise(() => ctl.stop())).toEqual({ code: 0, signal: null })
    }).pipe(Effect.provide(liveWorld(POOLS)), Effect.ensuring(Effect.promise(() => stopAllControllers()))), 90_000)
})
