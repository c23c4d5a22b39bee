/**
 * `release` in memory: each way of naming what to free (an audit report, --pod, --ip), a live
 * holder refused and --force, a stale report (an entry changed after the report, a pod reborn, an
 * address already freed), a release run again, --force still guarded per entry, dry-run writing
 * nothing, the output, the exit codes and a bad report file.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import type { OutputFormat } from "../../src/domain/option-values.ts"
import { audit } from "../../src/programs/audit.ts"
import { runSweep } from "../../src/programs/sweep.ts"
import { type ReleaseTargets, parseCli } from "../../src/programs/cli.ts"
import { type LoadedTargets, ReleaseInputError, loadTargets, release } from "../../src/programs/release.ts"
import { ControllerConfig } from "../../src/services/ControllerConfig.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { type RunningPod, deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { memory } from "../../src/testing/layers.ts"
import { PluginStore } from "../../src/testing/PluginStore.ts"
import { metric, on } from "../support/controller.ts"
import { type ApiCallInfo, ApiHooks, type MemoryEnv, memoryWithHooks, once } from "../support/hooks.ts"
import { podObject } from "../support/objects.ts"
import { allocationsOf, createNad, eventsIn, podrefsOf, reservationNames } from "../support/world.ts"

const NS = "default"
const POOL = "10.50.0.0-24"
const api = <A, E>(f: (k: typeof KubeApi.Service) => Effect.Effect<A, E>) => Effect.flatMap(KubeApi, f)

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "release-test-"))
let files = 0
const writeFile = (text: string) => {
  const file = path.join(tmp, `report-${++files}.json`)
  fs.writeFileSync(file, text)
  return file
}

/** `release` as the command line runs it: its arguments parsed, the report read from a file. */
const releaseWith = (args: ReadonlyArray<string>, options: { readonly dryRun?: boolean; readonly output?: OutputFormat } = {}) =>
  Effect.gen(function* () {
    const targets = yield* loadTargets(parseCli(["release", ...args]).release as ReleaseTargets)
    return yield* release(targets as LoadedTargets, options.output ?? "table").pipe(Effect.updateService(ControllerConfig, (c) => ({ ...c, dryRun: options.dryRun ?? false })))
  })

/** The audit report as `audit -o json > file` writes it. */
const auditToFile = Effect.map(audit("json"), (r) => writeFile(r.text))

/** The rows of a table result, as "RESULT KIND NAME IP PODREF | REASON" (spaces squeezed). */
const rowsOf = (text: string) =>
  text
    .split("\n")
    .slice(1)
    .filter((l) => /^(freed|would free|already free|skipped|refused|failed) /.test(l))
    .map((l) => l.replace(/\s{3,}/g, " | "))

const removeEntry = (pool: string, key: string) => api((k) => k.patch(R.IPPools, "kube-system", pool, { type: "json", ops: [{ op: "remove", path: `/spec/allocations/${key}` }] }))

const world = (pods: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* createNad(NS, "net1", { range: "10.50.0.0/24" })
    const started: Record<string, RunningPod> = {}
    for (const name of pods) started[name] = yield* startPod(NS, name, [on("net1")])
    return started
  })

describe("release --from-report", () => {
  it.live("frees exactly the orphans the report lists, with their reservations, Events saying an operator did it, counted under trigger operator", () =>
    Effect.gen(function* () {
      const pods = yield* world(["a", "b", "c", "keep"])
      yield* deletePod(pods["a"]!)
      yield* deletePod(pods["b"]!)
      const file = yield* auditToFile
      // An orphan that appears after the report is not the report's to free.
      yield* deletePod(pods["c"]!)

      const result = yield* releaseWith(["--from-report", file])
      expect(result.exitCode).toBe(0)
      expect(rowsOf(result.text)).toEqual([
        "freed | allocation | 10.50.0.0-24 | 10.50.0.1 | default/a",
        "freed | reservation | 10.50.0.1 | 10.50.0.1 | default/a",
        "freed | allocation | 10.50.0.0-24 | 10.50.0.2 | default/b",
        "freed | reservation | 10.50.0.2 | 10.50.0.2 | default/b"
      ])
      expect(result.text).toContain("Freed 2 addresses and 2 reservations.")
      expect(yield* podrefsOf(POOL)).toEqual(["default/c", "default/keep"])
      expect(yield* reservationNames).toEqual(["10.50.0.3", "10.50.0.4"])
      expect((yield* eventsIn(NS)).map((e) => `${e.type} ${e.reason} ${e.name}: ${e.message}`).sort()).toEqual([
        "Normal IPAddressGarbageCollected a: successful cleanup of IP address [10.50.0.1] from network net1 (released by an operator)",
        "Normal IPAddressGarbageCollected b: successful cleanup of IP address [10.50.0.2] from network net1 (released by an operator)"
      ])
      expect(yield* metric("ips_freed_total", { trigger: "operator" })).toBe(2)
      expect(yield* metric("reservations_deleted_total", { trigger: "operator" })).toBe(2)
      expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(0)
    }).pipe(Effect.provide(memory())))

  it.live("a stale report: an entry changed after it and a pod reborn are skipped, an address already freed is already free, each with the reason; the rest is freed; exit 1", () =>
    Effect.gen(function* () {
      const pods = yield* world(["a", "b", "c", "d"])
      for (const p of Object.values(pods)) yield* deletePod(p)
      const file = yield* auditToFile
      // a: reborn and re-ADDed (same address, another container id); b: reborn, not yet ADDed (Pending);
      // c: freed by someone else meanwhile (the controller, say); d: still an orphan.
      const a = yield* startPod(NS, "a", [on("net1")])
      expect(a.ips[0]!.ips).toEqual(["10.50.0.1"])
      yield* api((k) => k.create(R.Pods, NS, { ...podObject(NS, "b", { nodeName: "node-1", networks: "net1" }), status: { phase: "Pending" } }))
      yield* removeEntry(POOL, "3")
      yield* api((k) => k.delete(R.OverlappingRangeIPReservations, "kube-system", "10.50.0.3"))

      const result = yield* releaseWith(["--from-report", file])
      expect(result.exitCode).toBe(1)
      const uidOf = (name: string) => Effect.map(api((k) => k.get(R.Pods, NS, name)), (p) => p.metadata.uid ?? "")
      const [uidA, uidB] = [yield* uidOf("a"), yield* uidOf("b")]
      expect(rowsOf(result.text)).toEqual([
        "freed | allocation | 10.50.0.0-24 | 10.50.0.4 | default/d",
        "freed | reservation | 10.50.0.4 | 10.50.0.4 | default/d",
        `skipped | allocation | 10.50.0.0-24 | 10.50.0.1 | default/a | changed since the report: container id ${a.containerId} (was ${pods["a"]!.containerId}): a pod of that name took it back`,
        `skipped | allocation | 10.50.0.0-24 | 10.50.0.2 | default/b | no longer an orphan: pod default/b (uid ${uidB}) exists and may hold it`,
        "already free | allocation | 10.50.0.0-24 | 10.50.0.3 | default/c | already freed: pool 10.50.0.0-24 holds no allocation of 10.50.0.3",
        `skipped | reservation | 10.50.0.1 | 10.50.0.1 | default/a | no longer an orphan: pod default/a (uid ${uidA}) exists and may hold it`,
        `skipped | reservation | 10.50.0.2 | 10.50.0.2 | default/b | no longer an orphan: pod default/b (uid ${uidB}) exists and may hold it`,
        "already free | reservation | 10.50.0.3 | 10.50.0.3 | default/c | already deleted: no reservation 10.50.0.3"
      ])
      expect(result.text).toContain("Freed 1 address and 1 reservation; 2 already free, 4 skipped.")
      expect(yield* allocationsOf(POOL)).toEqual({
        "1": { id: a.containerId, podref: "default/a", ifname: "net1" },
        "2": { id: pods["b"]!.containerId, podref: "default/b", ifname: "net1" }
      })
      expect(yield* reservationNames).toEqual(["10.50.0.1", "10.50.0.2"])
    }).pipe(Effect.provide(memory())))

  it.live("a report with no orphans: nothing to do, exit 0; --output json is one document", () =>
    Effect.gen(function* () {
      yield* world(["a"])
      const file = yield* auditToFile
      const table = yield* releaseWith(["--from-report", file])
      expect(table).toEqual({ text: "Nothing to release.", exitCode: 0 })
      const json = yield* releaseWith(["--from-report", file], { output: "json" })
      expect(JSON.parse(json.text)).toEqual({ dryRun: false, freed: [], alreadyFree: [], skipped: [] })
    }).pipe(Effect.provide(memory())))

  it.live("run twice on the same report: the second run finds everything already free, says so, and exits 0 too", () =>
    Effect.gen(function* () {
      const pods = yield* world(["gone", "live"])
      yield* deletePod(pods["gone"]!)
      const file = yield* auditToFile
      const first = yield* releaseWith(["--from-report", file])
      expect(first.exitCode).toBe(0)
      expect(rowsOf(first.text)).toEqual(["freed | allocation | 10.50.0.0-24 | 10.50.0.1 | default/gone", "freed | reservation | 10.50.0.1 | 10.50.0.1 | default/gone"])
      const again = yield* releaseWith(["--from-report", file])
      expect(again.exitCode).toBe(0)
      expect(rowsOf(again.text)).toEqual([
        "already free | allocation | 10.50.0.0-24 | 10.50.0.1 | default/gone | already freed: pool 10.50.0.0-24 holds no allocation of 10.50.0.1",
        "already free | reservation | 10.50.0.1 | 10.50.0.1 | default/gone | already deleted: no reservation 10.50.0.1"
      ])
      expect(again.text).toContain("Freed 0 addresses and 0 reservations; 2 already free.")
      const json = JSON.parse((yield* releaseWith(["--from-report", file], { output: "json" })).text) as Record<string, ReadonlyArray<Record<string, unknown>>>
      expect(json["freed"]).toEqual([])
      expect(json["skipped"]).toEqual([])
      expect(json["alreadyFree"]!.map((r) => `${String(r["kind"])} ${String(r["ip"])}: ${String(r["reason"])}`)).toEqual([
        "allocation 10.50.0.1: already freed: pool 10.50.0.0-24 holds no allocation of 10.50.0.1",
        "reservation 10.50.0.1: already deleted: no reservation 10.50.0.1"
      ])
      expect(yield* podrefsOf(POOL)).toEqual(["default/live"])
    }).pipe(Effect.provide(memory())))
})

describe("release --pod and --ip", () => {
  it.live("a live holder is refused and nothing written; --force frees it; a pod that never runs again needs no --force; a pod holding nothing is already free", () =>
    Effect.gen(function* () {
      const pods = yield* world(["live", "done"])
      const refused = yield* releaseWith(["--pod", "default/live"])
      expect(refused.exitCode).toBe(1)
      const uid = pods["live"]!.uid
      expect(rowsOf(refused.text)).toEqual([
        `refused | allocation | 10.50.0.0-24 | 10.50.0.1 | default/live | pod default/live exists (uid ${uid}) and may run: refused (--force frees it anyway)`,
        `refused | reservation | 10.50.0.1 | 10.50.0.1 | default/live | pod default/live exists (uid ${uid}) and may run: refused (--force frees it anyway)`
      ])
      expect(yield* podrefsOf(POOL)).toEqual(["default/done", "default/live"])
      expect(yield* eventsIn(NS)).toEqual([])

      const forced = yield* releaseWith(["--pod", "default/live", "--force"])
      expect(forced.exitCode).toBe(0)
      expect(rowsOf(forced.text)).toEqual(["freed | allocation | 10.50.0.0-24 | 10.50.0.1 | default/live", "freed | reservation | 10.50.0.1 | 10.50.0.1 | default/live"])

      yield* api((k) => k.patch(R.Pods, NS, "done", { type: "merge", body: { status: { phase: "Succeeded" } } }))
      expect((yield* releaseWith(["--pod", "default/done"])).exitCode).toBe(0)
      expect(yield* podrefsOf(POOL)).toEqual([])
      expect(yield* reservationNames).toEqual([])
      expect((yield* eventsIn(NS)).map((e) => `${e.name}: ${e.message}`).sort()).toEqual([
        "done: successful cleanup of IP address [10.50.0.2] from network net1 (pod Succeeded; released by an operator)",
        "live: successful cleanup of IP address [10.50.0.1] from network net1 (released by an operator with --force)"
      ])
      expect(yield* metric("ips_freed_total", { trigger: "operator" })).toBe(2)

      const nothing = yield* releaseWith(["--pod", "default/nobody"])
      expect(nothing.exitCode).toBe(0)
      expect(rowsOf(nothing.text)).toEqual(["already free | pod | - | - | default/nobody | pod default/nobody holds no address in these pools"])
      // Run again, --pod finds what it freed already free.
      const again = yield* releaseWith(["--pod", "default/live", "--force"])
      expect(again.exitCode).toBe(0)
      expect(rowsOf(again.text)).toEqual(["already free | pod | - | - | default/live | pod default/live holds no address in these pools"])
    }).pipe(Effect.provide(memory())))

  it.live("--ip frees one address of a pod on two networks, with its reservation; the other address stays; an unknown pool is skipped, an address no entry holds already free", () =>
    Effect.gen(function* () {
      yield* createNad(NS, "net1", { range: "10.50.0.0/24" })
      yield* createNad(NS, "blue", { range: "10.51.0.0/24", network_name: "blue" })
      const p = yield* startPod(NS, "p", [on("net1"), on("blue", "net2")])
      yield* deletePod(p)
      const result = yield* releaseWith(["--ip", "blue-10.51.0.0-24/10.51.0.1"])
      expect(result.exitCode).toBe(0)
      expect(rowsOf(result.text)).toEqual(["freed | allocation | blue-10.51.0.0-24 | 10.51.0.1 | default/p", "freed | reservation | blue-10.51.0.1 | 10.51.0.1 | default/p"])
      expect(yield* podrefsOf("blue-10.51.0.0-24")).toEqual([])
      expect(yield* podrefsOf(POOL)).toEqual(["default/p"])
      expect(yield* reservationNames).toEqual(["10.50.0.1"])
      expect((yield* eventsIn(NS)).map((e) => e.message)).toEqual(["successful cleanup of IP address [10.51.0.1] from network blue (released by an operator)"])

      const missing = yield* releaseWith(["--ip", "nope/10.9.9.9", "--ip", `${POOL}/10.50.0.200`])
      expect(missing.exitCode).toBe(1)
      expect(rowsOf(missing.text)).toEqual([
        "skipped | allocation | nope | 10.9.9.9 | - | no pool nope",
        "already free | allocation | 10.50.0.0-24 | 10.50.0.200 | - | pool 10.50.0.0-24 holds no allocation of 10.50.0.200"
      ])
      const freedBefore = yield* releaseWith(["--ip", "blue-10.51.0.0-24/10.51.0.1"])
      expect(freedBefore.exitCode).toBe(0)
      expect(rowsOf(freedBefore.text)).toEqual(["already free | allocation | blue-10.51.0.0-24 | 10.51.0.1 | - | pool blue-10.51.0.0-24 holds no allocation of 10.51.0.1"])
    }).pipe(Effect.provide(memory())))

  it.live("--force still goes through the guarded write: an entry rewritten between the read and the write is skipped, and its reservation given back", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      const pods = yield* world(["web-0"])
      // Right before the pool patch, the pod's sandbox is re-created: the plugin rewrites the entry's container id.
      hooks.before = once(
        (c: ApiCallInfo) => c.verb === "patch" && c.resource === "ippools",
        () =>
          Effect.flatMap(PluginStore, (w) =>
            w.updatePool(POOL, (a) => Either.right({ ...a, "1": { ...a["1"]!, id: "new-sandbox" } }))
          ).pipe(Effect.asVoid, Effect.provide(env), Effect.orDie)
      )
      const result = yield* releaseWith(["--pod", "default/web-0", "--force"])
      hooks.clear()
      expect(result.exitCode).toBe(1)
      expect(rowsOf(result.text)).toEqual([
        "skipped | allocation | 10.50.0.0-24 | 10.50.0.1 | default/web-0 | changed right before the write (the guarded patch left it): no longer the entry read",
        "skipped | reservation | 10.50.0.1 | 10.50.0.1 | default/web-0 | given back: its address was taken back before the pool write"
      ])
      expect(yield* allocationsOf(POOL)).toEqual({ "1": { id: "new-sandbox", podref: "default/web-0", ifname: "net1" } })
      expect(yield* reservationNames).toEqual(["10.50.0.1"])
      expect(yield* eventsIn(NS)).toEqual([])
      expect(pods["web-0"]!.containerId).not.toBe("new-sandbox")
    }).pipe(Effect.provide(memoryWithHooks())))
})

describe("release next to a running controller", () => {
  it.live("the controller's sweep frees a report's orphan first: release's guarded patch skips it, finds it already free, and it is freed once, with one Event", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const env = yield* Effect.context<MemoryEnv>()
      const pods = yield* world(["gone"])
      yield* deletePod(pods["gone"]!)
      const file = yield* auditToFile
      hooks.before = once(
        (c: ApiCallInfo) => c.verb === "patch" && c.resource === "ippools",
        () => runSweep({ dryRun: false }).pipe(Effect.asVoid, Effect.provide(env), Effect.orDie)
      )
      const result = yield* releaseWith(["--from-report", file])
      hooks.clear()
      expect(result.exitCode).toBe(0)
      expect(rowsOf(result.text)).toEqual([
        "already free | allocation | 10.50.0.0-24 | 10.50.0.1 | default/gone | freed by another right before the write",
        // Release had deleted the reservation before its pool patch: the sweep found it gone.
        "freed | reservation | 10.50.0.1 | 10.50.0.1 | default/gone"
      ])
      expect(yield* reservationNames).toEqual([])
      expect(yield* podrefsOf(POOL)).toEqual([])
      expect((yield* eventsIn(NS)).map((e) => `${e.name}: ${e.message} x${e.count}`)).toEqual(["gone: successful cleanup of IP address [10.50.0.1] from network net1 x1"])
      expect(yield* metric("ips_freed_total", { trigger: "sweep" })).toBe(1)
      expect(yield* metric("ips_freed_total", { trigger: "operator" })).toBe(0)
    }).pipe(Effect.provide(memoryWithHooks())))
})

describe("release --dry-run, output, exit codes", () => {
  it.live("--dry-run prints what it would free and what it would skip, and writes nothing", () =>
    Effect.gen(function* () {
      const hooks = yield* ApiHooks
      const pods = yield* world(["gone", "live"])
      yield* deletePod(pods["gone"]!)
      const writes: Array<string> = []
      hooks.before = (c) => Effect.sync(() => void (c.verb === "get" || c.verb === "list" ? undefined : writes.push(`${c.verb} ${c.resource}`)))
      const dry = yield* releaseWith(["--pod", "default/gone", "--pod", "default/live"], { dryRun: true })
      const file = yield* auditToFile
      const fromReport = yield* releaseWith(["--from-report", file], { dryRun: true, output: "json" })
      hooks.clear()
      expect(writes).toEqual([])
      expect(dry.exitCode).toBe(1)
      expect(rowsOf(dry.text)).toEqual([
        "would free | allocation | 10.50.0.0-24 | 10.50.0.1 | default/gone",
        "would free | reservation | 10.50.0.1 | 10.50.0.1 | default/gone",
        `refused | allocation | 10.50.0.0-24 | 10.50.0.2 | default/live | pod default/live exists (uid ${pods["live"]!.uid}) and may run: refused (--force frees it anyway)`,
        `refused | reservation | 10.50.0.2 | 10.50.0.2 | default/live | pod default/live exists (uid ${pods["live"]!.uid}) and may run: refused (--force frees it anyway)`
      ])
      expect(dry.text).toContain("Would free 1 address and 1 reservation; 2 refused. (dry run: nothing written)")
      expect(fromReport.exitCode).toBe(0)
      expect(JSON.parse(fromReport.text)).toEqual({
        dryRun: true,
        wouldFree: [
          { kind: "allocation", pool: POOL, ip: "10.50.0.1", podref: "default/gone" },
          { kind: "reservation", name: "10.50.0.1", ip: "10.50.0.1", podref: "default/gone" }
        ],
        alreadyFree: [],
        skipped: []
      })
      expect(yield* podrefsOf(POOL)).toEqual(["default/gone", "default/live"])
      expect(yield* reservationNames).toEqual(["10.50.0.1", "10.50.0.2"])
      expect(yield* eventsIn(NS)).toEqual([])
      expect(yield* metric("ips_freed_total", { trigger: "operator" })).toBe(0)
    }).pipe(Effect.provide(memoryWithHooks())))

  it.live("--output json: what was freed, and what was not with its result and reason", () =>
    Effect.gen(function* () {
      const pods = yield* world(["gone", "live"])
      yield* deletePod(pods["gone"]!)
      const result = yield* releaseWith(["--pod", "default/gone", "--ip", `${POOL}/10.50.0.2`], { output: "json" })
      expect(result.exitCode).toBe(1)
      const why = `pod default/live exists (uid ${pods["live"]!.uid}) and may run: refused (--force frees it anyway)`
      expect(JSON.parse(result.text)).toEqual({
        dryRun: false,
        freed: [
          { kind: "allocation", pool: POOL, ip: "10.50.0.1", podref: "default/gone" },
          { kind: "reservation", name: "10.50.0.1", ip: "10.50.0.1", podref: "default/gone" }
        ],
        alreadyFree: [],
        skipped: [
          { result: "refused", kind: "allocation", pool: POOL, ip: "10.50.0.2", podref: "default/live", reason: why },
          { result: "refused", kind: "reservation", name: "10.50.0.2", ip: "10.50.0.2", podref: "default/live", reason: why }
        ]
      })
    }).pipe(Effect.provide(memory())))

  it.effect.each([
    ["a file that does not exist", undefined, "cannot read it: ENOENT"],
    ["an empty file", "", "is empty"],
    ["audit's table instead of its JSON", "POOL   RANGE\n10.50.0.0-24   10.50.0.0/24\n", "is not JSON ("],
    ["JSON that is not a report", '{"pools": []}', "orphanedAllocations is missing"],
    ["a report with a bad address", '{"orphanedAllocations": [{"pool": "p", "ip": "10.50.0.300", "podref": "default/a"}], "orphanedReservations": []}', 'orphanedAllocations[0].ip "10.50.0.300" is not an IP address']
  ] as const)("a bad report (%s): one line naming the file and what is wrong, before anything is read from the cluster", ([, text, why]) =>
    Effect.gen(function* () {
      const file = text === undefined ? path.join(tmp, "missing.json") : writeFile(text)
      const failed = yield* Effect.flip(loadTargets({ _tag: "Report", path: file }))
      expect(failed).toBeInstanceOf(ReleaseInputError)
      expect(failed.message.startsWith(`--from-report ${file}: `)).toBe(true)
      expect(failed.message).toContain(why)
      expect(failed.message).not.toContain("\n")
    })
  )

  it("bad usage is refused by the command line with one line naming the flag", () => {
    expect(() => parseCli(["release"])).toThrow("release: say what to free with --from-report <file>, --pod <namespace>/<name> or --ip <pool>/<ip>")
    expect(() => parseCli(["release", "--pod", "web-0"])).toThrow('--pod "web-0": expected <namespace>/<name>')
    expect(() => parseCli(["release", "--ip", "10.50.0.0/24"])).toThrow('--ip "10.50.0.0/24": "24" is not an IP address')
    expect(() => parseCli(["release", "--ip", "10.50.0.1"])).toThrow('--ip "10.50.0.1": expected <pool>/<ip>')
    expect(() => parseCli(["release", "--from-report", "r.json", "--pod", "a/b"])).toThrow("--from-report cannot be combined with --pod or --ip")
    expect(() => parseCli(["release", "--from-report", "r.json", "--force"])).toThrow("--force applies to --pod and --ip only")
    expect(() => parseCli(["audit", "--force"])).toThrow("--force is an option of the release command")
    expect(parseCli(["release", "--pod", "a/b", "--pod", "c/d", "--ip", "p/fd00::1", "--force"]).release).toEqual({
      _tag: "Named",
      pods: [
        { namespace: "a", name: "b" },
        { namespace: "c", name: "d" }
      ],
      ips: [{ pool: "p", ip: { family: 6, value: 0xfd00n << 112n | 1n } }],
      force: true
    })
  })
})
