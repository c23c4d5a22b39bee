/**
 * An address kept for a pod whose network cannot be read must be freed once that pod is gone.
 *
 * Rule 0 (src/domain/claims.ts) keeps a dead pod's address while another live pod lists it, and
 * counts a listing whose NAD cannot be read in every collision domain. Upstream's e2e suite deletes
 * a NAD before the pods using it (its OverlappingRangeIPReservation specs: the second NAD, then both
 * pods), so the first pod's address is kept while the second pod lives on an unreadable network —
 * then the second pod goes, and nothing looks at the kept address again: pool entry and reservation
 * stay until the next scheduled sweep, and a later ADD in that range skips the address (the suite's
 * StatefulSet specs then find 21 allocations for 20 pods, and a /30 that cannot fill).
 *
 * Kubernetes' own controllers and node agents that never DEL, as in lifecycle.test.ts.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { NETWORKS_ANNOTATION } from "../../src/domain/multus.ts"
import { poolName } from "../../src/domain/pool.ts"
import { describeWithKubernetes } from "../support/live.ts"
import { podsOf, TEST_TIMEOUT } from "./support/kubernetes.ts"
import { Cluster, lifecycleFixture } from "./support/lifecycle-fixture.ts"
import { createNad, poolView, reservationView, restOk, waitForEqual, waitUntil } from "./support/world.ts"

describeWithKubernetes("an address kept for a pod on an unreadable network, once that pod is gone", () => {
  const { NS, SELECT, controller, run } = lifecycleFixture("cg", 2)

  it("is freed, with its reservation: two pods on one address, the second's NAD deleted first, then both pods (upstream's e2e teardown)", () =>
    run(
      Effect.gen(function* () {
        const k8s = yield* Cluster
        yield* controller.get
        // Overlapping ranges off on the narrower network: it hands out the wider one's first address again.
        yield* createNad(NS, "wide", { range: "10.160.0.0/16" })
        yield* createNad(NS, "narrow", { range: "10.160.0.0/17", enable_overlapping_ranges: false })
        const pod = (name: string, nad: string) => ({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name, annotations: { [NETWORKS_ANNOTATION]: nad } },
          spec: { nodeSelector: SELECT, terminationGracePeriodSeconds: 1, containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }] }
        })
        for (const [name, nad] of [["first", "wide"], ["second", "narrow"]] as const) {
          yield* restOk(k8s.admin, "POST", `/api/v1/namespaces/${NS}/pods`, pod(name, nad), [201])
          yield* waitUntil(`${name} runs`, podsOf(k8s.admin, NS), (ps) => ps.some((p) => p.name === name && p.phase === "Running"), { context: k8s.context })
        }
        const pods = yield* podsOf(k8s.admin, NS)
        expect(pods.map((p) => `${p.name} ${p.ips.join(",")}`).sort()).toEqual(["first 10.160.0.1", "second 10.160.0.1"])
        expect(yield* poolView(poolName("10.160.0.0/16", ""))).toEqual({ "10.160.0.1": `${NS}/first` })

        yield* restOk(k8s.admin, "DELETE", `/apis/k8s.cni.cncf.io/v1/namespaces/${NS}/network-attachment-definitions/narrow`, undefined, [200])
        for (const name of ["first", "second"]) {
          yield* restOk(k8s.admin, "DELETE", `/api/v1/namespaces/${NS}/pods/${name}`, undefined, [200])
          yield* waitUntil(`${name} gone`, podsOf(k8s.admin, NS), (ps) => !ps.some((p) => p.name === name), { context: k8s.context })
        }
        yield* waitForEqual("the first pod's entry freed", poolView(poolName("10.160.0.0/16", "")), {}, { context: k8s.context })
        yield* waitForEqual("and its reservation", Effect.map(reservationView, (r) => Object.keys(r).filter((n) => n.startsWith("10.160."))), [], { context: k8s.context })
      })
    ), TEST_TIMEOUT)
})
