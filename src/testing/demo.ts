/**
 * `demo`: the real controller program on the embedded in-memory cluster, replaying the classic
 * failure — a full pool, a pod deleted without CNI DEL, a new pod stuck in ContainerCreating —
 * and its repair: by the start-up sweep, then on a deletion, then for a pod the taint manager
 * evicted from a dead node, still Terminating.
 */
import { Effect, Either, Fiber, Schedule } from "effect"
import { formatIP } from "../domain/ip.ts"
import { parseCidr } from "../domain/ip.ts"
import { KubeApi } from "../services/KubeApi.ts"
import { InMemoryCluster } from "./InMemoryCluster.ts"
import { metric } from "./prom.ts"
import * as R from "../services/resources.ts"
import { audit } from "../programs/audit.ts"
import { deletePod, startPod } from "./cni-plugin.ts"
import { memory } from "./layers.ts"
import { runController } from "../programs/run.ts"

const NS = "default"
const NAD = "storage"
const RANGE = "10.10.10.0/30"
const POOL = "10.10.10.0-30"
const on = [{ nad: { namespace: NS, name: NAD }, ifname: "net1" }] as const

const poolTable = Effect.gen(function* () {
  const api = yield* KubeApi
  const pool = yield* api.get(R.IPPools, "kube-system", POOL)
  const allocations = (pool["spec"] as { allocations: Record<string, { podref: string; id: string }> }).allocations
  const base = parseCidr(RANGE)!
  const rows = Object.entries(allocations).map(([offset, a]) => `     ${formatIP({ family: 4, value: base.address + BigInt(offset) }).padEnd(12)} ${a.podref}`)
  return [`     IPPool kube-system/${POOL} (${Object.keys(allocations).length} of 2 addresses used)`, ...rows].join("\n")
})

const eventsTable = (namespace: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const now = Date.now()
    const list = yield* api.list(R.Events, namespace)
    const rows = [...list.items]
      // Event names end in the creation time in hex nanoseconds: a finer order than the timestamps.
      .sort((a, b) => (a.metadata.name.split(".").pop() ?? "").localeCompare(b.metadata.name.split(".").pop() ?? ""))
      .map((o) => o as unknown as { type: string; reason: string; message: string; lastTimestamp: string; involvedObject: { kind: string; name: string } })
      .map((e) => [
        `${Math.max(0, Math.round((now - Date.parse(e.lastTimestamp)) / 1000))}s`,
        e.type,
        e.reason,
        `${e.involvedObject.kind.toLowerCase()}/${e.involvedObject.name}`,
        e.message
      ])
    const header = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)))
    return [header, ...rows].map((r) => `     ${r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("   ")}`).join("\n")
  })

/** Polls (real time) until `cond` holds; fails after 10 s so a broken demo exits non-zero. */
const until = (what: string, cond: Effect.Effect<boolean, unknown, KubeApi>) =>
  cond.pipe(
    Effect.flatMap((ok) => (ok ? Effect.void : Effect.fail(what))),
    Effect.retry(Schedule.spaced("20 millis")),
    Effect.timeoutFail({ duration: "10 seconds", onTimeout: () => new Error(`demo: timed out waiting until ${what}`) })
  )

const holder = (ip: string) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    const pool = yield* api.get(R.IPPools, "kube-system", POOL)
    const allocations = (pool["spec"] as { allocations: Record<string, { podref: string }> }).allocations
    const offset = String(Number(ip.split(".")[3]))
    return allocations[offset]?.podref
  })

/** The story, printed with `say`. */
export const story = (say: (line: string) => void) =>
  Effect.gen(function* () {
    const api = yield* KubeApi
    say("whereabouts-controller demo: the real controller program on an embedded in-memory cluster.\n")

    say(`1. NetworkAttachmentDefinition ${NS}/${NAD} hands out ${RANGE} through whereabouts: 2 usable addresses.`)
    yield* api.create(R.NetworkAttachmentDefinitions, NS, {
      metadata: { name: NAD, namespace: NS },
      spec: { config: JSON.stringify({ cniVersion: "0.3.1", name: NAD, type: "macvlan", master: "eth1", ipam: { type: "whereabouts", range: RANGE } }) }
    })

    say("2. StatefulSet db scales to 2 replicas.")
    const db0 = yield* startPod(NS, "db-0", on, "node-1")
    const db1 = yield* startPod(NS, "db-1", on, "node-2")
    say(`     pod ${NS}/db-0 Running, net1 = ${db0.ips[0]!.ips[0]}`)
    say(`     pod ${NS}/db-1 Running, net1 = ${db1.ips[0]!.ips[0]}`)
    say(yield* poolTable)

    say("\n3. node-2 crashes; db-1 is force-deleted. No CNI DEL ever runs for it:")
    yield* deletePod(db1)
    say(`     ${db1.ips[0]!.ips[0]} is still allocated to ${yield* holder(db1.ips[0]!.ips[0]!)}, a pod that no longer exists.`)

    say("\n4. Without a controller, a new pod api-0 hangs in ContainerCreating:")
    const stuck = yield* Effect.either(startPod(NS, "api-0", on, "node-1"))
    if (Either.isRight(stuck)) return yield* Effect.fail(new Error("demo: api-0 unexpectedly got an address"))
    say(`     Warning  FailedCreatePodSandBox  pod/api-0  ${"message" in stuck.left ? stuck.left.message : String(stuck.left)}`)
    yield* api.delete(R.Pods, NS, "api-0", { gracePeriodSeconds: 0 })

    say("\n5. whereabouts-controller starts. Its start-up sweep finds the address of the deleted db-1:")
    const controller = yield* Effect.fork(runController)
    yield* until("db-1's address is freed", Effect.map(holder(db1.ips[0]!.ips[0]!), (h) => h === undefined))
    say(yield* poolTable)
    say(`\n   kubectl get events -n ${NS}`)
    say(yield* eventsTable(NS))

    say("\n6. api-0 is retried and starts:")
    const api0 = yield* startPod(NS, "api-0", on, "node-1")
    say(`     pod ${NS}/api-0 Running, net1 = ${api0.ips[0]!.ips[0]}`)

    say("\n7. api-0's node crashes too; the deletion loop frees its address at once:")
    yield* deletePod(api0)
    yield* until("api-0's address is freed", Effect.map(holder(api0.ips[0]!.ips[0]!), (h) => h === undefined))
    say(yield* poolTable)
    say(`\n   kubectl get events -n ${NS}`)
    say(yield* eventsTable(NS))

    say("\n8. node-1 loses power. Once the unreachable toleration runs out, the taint manager marks db-0 and")
    say("   deletes it, but with no kubelet to confirm, db-0 stays Terminating: it will never run again,")
    say("   and the controller frees its address while the object still exists:")
    const cluster = yield* InMemoryCluster
    cluster.taintManagerEvict(NS, "db-0", R.Pods)
    yield* until("db-0's address is freed", Effect.map(holder(db0.ips[0]!.ips[0]!), (h) => h === undefined))
    const terminating = yield* api.get(R.Pods, NS, "db-0")
    say(`     pod ${NS}/db-0 still exists, Terminating (deletionTimestamp ${terminating.metadata.deletionTimestamp})`)
    say(yield* poolTable)
    say(`\n   kubectl get events -n ${NS}`)
    say(yield* eventsTable(NS))

    const bySweep = (yield* metric("ips_freed_total", { trigger: "sweep" })) ?? 0
    const byDeletion = (yield* metric("ips_freed_total", { trigger: "deletion" })) ?? 0
    const byEviction = (yield* metric("ips_freed_total", { trigger: "evicted" })) ?? 0
    const report = yield* audit("table")
    yield* Fiber.interrupt(controller)
    say("\nSummary")
    say(`   freed by the start-up sweep: ${bySweep}, on deletion: ${byDeletion}, of an evicted pod still Terminating: ${byEviction}`)
    say(`   untouched while it ran: ${NS}/db-0 kept ${db0.ips[0]!.ips[0]} (live pods are never freed)`)
    say(`   audit: ${report.exitCode === 0 ? "no orphaned allocations or reservations" : "ORPHANS LEFT"}`)
    return report.exitCode === 0 && bySweep === 1 && byDeletion === 1 && byEviction === 1 ? 0 : 1
  })

/** The demo environment: in-memory cluster, no HTTP ports, quick leader election. */
export const demoLayer = memory({ healthPort: 0, metricsPort: 0, concurrentBatches: 2, identity: "demo-controller" })
