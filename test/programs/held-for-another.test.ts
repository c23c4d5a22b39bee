/**
 * Rule 0 in the deletion loop, in memory: a deleted pod's address another running pod lists is
 * kept, and looked at again when that pod comes through the loop. Found with upstream's e2e suite
 * on real controllers (test/live/claimant-gone.test.ts): it deletes a NAD, then the two pods on
 * one address; the first pod's entry was kept for the second and then never looked at again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { startPod } from "../../src/testing/cni-plugin.ts"
import { memory } from "../../src/testing/layers.ts"
import { metric, on, startDeletionLoop } from "../support/controller.ts"
import { eventually, require } from "../support/eventually.ts"
import { cachesCaughtUp, createNad, podrefsOf } from "../support/world.ts"

const NS = "default"
const WIDE = "10.131.0.0-16"

const deleted = (name: string) => Effect.flatMap(KubeApi, (k) => k.delete(R.Pods, NS, name, { gracePeriodSeconds: 0 }))

describe("rule 0 in the deletion loop", () => {
  it.live("a deleted pod's address another pod lists is kept while that pod runs, and freed once it is deleted", () =>
    Effect.scoped(
      Effect.gen(function* () {
        // Overlapping ranges off on the narrower network: it hands out the wider one's first address again.
        yield* createNad(NS, "wide", { range: "10.131.0.0/16" })
        yield* createNad(NS, "narrow", { range: "10.131.0.0/17", enable_overlapping_ranges: false })
        yield* startDeletionLoop()
        const first = yield* startPod(NS, "first", [on("wide")])
        const second = yield* startPod(NS, "second", [on("narrow")])
        expect([first.ips[0]!.ips, second.ips[0]!.ips]).toEqual([["10.131.0.1"], ["10.131.0.1"]])
        // The second pod's network can no longer be read: its listing counts in every domain.
        yield* Effect.flatMap(KubeApi, (k) => k.delete(R.NetworkAttachmentDefinitions, NS, "narrow"))
        yield* cachesCaughtUp

        const batches = () => Effect.map(metric("free_batch_duration_seconds_count"), (n) => n ?? 0)
        const before = yield* batches()
        yield* deleted("first")
        yield* eventually(Effect.flatMap(batches(), (n) => require(() => n > before, "first's deletion handled")), "10 seconds")
        expect(yield* podrefsOf(WIDE)).toEqual([`${NS}/first`])

        yield* deleted("second")
        yield* eventually(Effect.flatMap(podrefsOf(WIDE), (refs) => require(() => refs.length === 0, `first's entry freed once second is gone: ${refs.join(",")}`)), "10 seconds")
      })
    ).pipe(Effect.provide(memory({ namespace: "kube-system", retryBaseDelay: Duration.millis(5) }))))
})
