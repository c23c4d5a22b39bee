/** Pods listed as protobuf project exactly as the same pods listed as JSON, on a real API server. */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { projectPod } from "../../src/domain/pod.ts"
import { KubeApi, listAll } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { networkStatusFor, realisticPod } from "../../bench/lib/pods.ts"
import { namespaceObject } from "../support/objects.ts"
import { describeLive, liveKubeApi, uniqueNamespace } from "../support/live.ts"
import { patchPodStatus } from "./support/world.ts"

describeLive("pods listed as protobuf", () => {
  const ns = uniqueNamespace("pb")
  it.live("project as the JSON list does: realistic pods, deletion timestamps, phases, reasons, conditions, legacy status, no annotations", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      yield* api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.ignore)
      for (let i = 0; i < 25; i++) {
        const nets = i % 3 === 0 ? { networks: "", networkStatus: networkStatusFor(i, []) } : { networks: `${ns}/net1`, networkStatus: networkStatusFor(i, [{ network: `${ns}/net1`, ifname: "net1", ips: [`10.9.0.${i + 1}`, `fd00::${i + 1}`] }]) }
        const pod = realisticPod(ns, `p${i}`, i, nets, { nodeName: i % 5 === 0 ? undefined : `node-${i % 4}`, forCreate: true })
        const created = yield* api.create(R.Pods, ns, i === 7 ? { ...pod, metadata: { ...pod.metadata, annotations: { "k8s.v1.cni.cncf.io/networks-status": nets.networkStatus, "k8s.v1.cni.cncf.io/networks": "ñet-✓ – “ключ”", "example.com/note": "skipped" }, finalizers: ["example.com/hold"] } } : i === 8 ? { ...pod, metadata: { ...pod.metadata, annotations: {} } } : pod)
        if (i % 4 === 1) {
          const phase = ["Succeeded", "Failed", "Running", "Pending"][i % 4 === 1 ? (i / 4) % 4 | 0 : 0]!
          const status = { phase, reason: i === 5 ? "Evicted" : "", conditions: [{ type: "Ready", status: "False" }, { type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager", message: "taint" }] }
          yield* patchPodStatus(ns, created.metadata.name, status)
        }
      }
      // A pod held by a finalizer and deleted: a deletionTimestamp.
      yield* api.delete(R.Pods, ns, "p7", { gracePeriodSeconds: 0 })
      const json = yield* listAll(R.Pods, ns, { pageSize: 7 })
      const pb = yield* listAll(R.Pods, ns, { pageSize: 7, podFields: true })
      expect(pb.items.length).toBe(25)
      expect(pb.items.map(projectPod)).toEqual(json.items.map(projectPod))
      // The cases the list holds, so that the equality above covers them.
      const projected = pb.items.map(projectPod)
      expect(projected.filter((p) => p.deletionTimestamp !== undefined).map((p) => p.name)).toEqual(["p7"])
      expect(projected.find((p) => p.name === "p7")?.legacyStatus).toBe(true)
      expect(projected.find((p) => p.name === "p7")?.networks).toBe("ñet-✓ – “ключ”")
      expect(projected.find((p) => p.name === "p5")?.phaseReason).toBe("Evicted")
      expect(new Set(projected.map((p) => p.phase))).toEqual(new Set(["Succeeded", "Failed", "Running", "Pending"]))
      expect(projected.filter((p) => p.disruption === "DeletionByTaintManager").length).toBeGreaterThan(0)
      expect(projected.find((p) => p.name === "p8")?.networkStatus).toBeUndefined()
      // An error answered as a protobuf Status reads as its message.
      const refused = yield* Effect.flip(api.list(R.Pods, ns, { podFields: true, fieldSelector: "spec.bogus=x" }))
      expect(refused.reason).toBe("BadRequest")
      expect(refused.message).toContain("field label not supported: spec.bogus")
      yield* api.patch(R.Pods, ns, "p7", { type: "json", ops: [{ op: "remove", path: "/metadata/finalizers" }] }).pipe(Effect.ignore)
    }).pipe(Effect.provide(liveKubeApi())))
})
