/**
 * The one-shot commands as a user runs them against a real API server: what they print on stdout
 * is the report alone (logs go to stderr), and the exit code says whether orphans exist (audit)
 * or whether everything asked for is free afterwards (release), apart from bad usage (2) and a
 * command that could not complete (3). release runs as an operator would: with its own
 * credentials, bound to exactly deploy/operator/release-clusterrole.yaml.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { deletePod, startPod } from "../../src/testing/cni-plugin.ts"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { freePort } from "./cluster.ts"
import { runCommand } from "./support/controller-process.ts"
import { type Obj, applyObjects, deployObjects, serviceAccountToken, writeTokenKubeconfig } from "./support/rbac.ts"
import { adminCredentials, createNad, credentialsOf, rest, ensureNamespace, eventLines, gcMessage, liveWorld, on, poolEntries, reservationView } from "./support/world.ts"

/** A ServiceAccount bound to deploy/operator/release-clusterrole.yaml (renamed for this run), and a kubeconfig with its token. */
const operatorKubeconfig = (name: string) =>
  Effect.gen(function* () {
    const admin = adminCredentials()
    const [role] = deployObjects("operator/release-clusterrole.yaml")
    const subjects = [{ kind: "ServiceAccount", name, namespace: "kube-system" }]
    const objects: ReadonlyArray<Obj> = [
      { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, namespace: "kube-system" } },
      { ...role!, metadata: { ...role!.metadata, name } },
      { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRoleBinding", metadata: { name }, roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name }, subjects }
    ]
    yield* applyObjects(admin, objects)
    const token = yield* serviceAccountToken(admin, "kube-system", name)
    return writeTokenKubeconfig(path.join(fs.mkdtempSync(path.join(os.tmpdir(), "release-operator-")), "kubeconfig"), admin, name, token)
  })

/**
 * The log lines' text without their timestamps: a millisecond field such as `.403Z` must not read as an
 * HTTP status when a test asks that nothing was forbidden.
 */
const logText = (stderr: string) => stderr.replace(/"timestamp":"[^"]*"/g, "")

describeLive("commands against a real API server", () => {
  const POOLS = uniqueNamespace("cmd-pools")
  // Pools of their own for the exit-code tests below: the first test leaves an orphan in POOLS.
  const [CLEAN_POOLS, TWICE_POOLS] = [uniqueNamespace("clean-pools"), uniqueNamespace("twice-pools")]
  const run = (command: string, args: ReadonlyArray<string>, namespace = POOLS) =>
    Effect.promise(() => runCommand(command, { kubeconfig: runningEnvtest().kubeconfigPath, namespace, args }))

  it.live("audit -o json: stdout is one JSON document (the logs are on stderr); exit 1 with an orphan", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("cmd")
      yield* ensureNamespace(POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.166.0.0/24" })
      yield* startPod(ns, "keep", [on(`${ns}/net`)])
      const gone = yield* startPod(ns, "gone", [on(`${ns}/net`)])
      yield* deletePod(gone)
      const dirty = yield* run("audit", ["-o", "json"]) // the short form, as in `audit -o json > report.json`
      const report = JSON.parse(dirty.stdout) as { orphanedAllocations: Array<{ ip: string; podref: string }> }
      expect(report.orphanedAllocations.map((o) => `${o.ip} ${o.podref}`)).toEqual([`10.166.0.2 ${ns}/gone`])
      expect(dirty.code).toBe(1)
      // At its default level audit says on stderr only what is wrong: no line of what it did. Asked
      // for, the sweep's summary line is a log line: on stderr, as JSON (stderr is no terminal here).
      expect(dirty.stderr).not.toContain('"logLevel":"INFO"')
      const verbose = yield* run("audit", ["-o", "json", "--log-level", "info"])
      expect(verbose.stderr.split("\n").some((l) => l.includes('"message":"sweep finished (dry run: nothing freed)"'))).toBe(true)
      const table = yield* run("audit", [])
      expect(table.code).toBe(1)
      expect(table.stdout.startsWith("POOL ")).toBe(true)
      expect(table.stdout).not.toContain('"logLevel"')
    }).pipe(Effect.provide(liveWorld(POOLS))), 60_000)

  // Pools of their own: the audit above leaves an orphan in POOLS.
  const RELEASE_POOLS = uniqueNamespace("rel-pools")
  it.live("release --from-report: audit -o json > file, then only the report's orphans still the same are freed (a stale entry and a live holder skipped); --pod refuses a live holder, --force frees it; bad input exits 2", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("rel")
      yield* ensureNamespace(RELEASE_POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.167.0.0/24" })
      const pods = { keep: yield* startPod(ns, "keep", [on(`${ns}/net`)]), gone: yield* startPod(ns, "gone", [on(`${ns}/net`)]), reborn: yield* startPod(ns, "reborn", [on(`${ns}/net`)]), freed: yield* startPod(ns, "freed", [on(`${ns}/net`)]) }
      for (const p of [pods.gone, pods.reborn, pods.freed]) yield* deletePod(p)
      const audited = yield* Effect.promise(() => runCommand("audit", { kubeconfig: runningEnvtest().kubeconfigPath, namespace: RELEASE_POOLS, args: ["--output", "json"] }))
      expect(audited.code).toBe(1)
      const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "release-report-")), "report.json")
      fs.writeFileSync(report, audited.stdout)
      // After the report: reborn comes back under its name and is re-ADDed (same address, new container id);
      // freed's address is freed by someone else (the controller, say).
      const reborn = yield* startPod(ns, "reborn", [on(`${ns}/net`)])
      expect(reborn.ips[0]!.ips).toEqual(["10.167.0.3"])
      const api = yield* KubeApi
      yield* api.patch(R.IPPools, RELEASE_POOLS, "10.167.0.0-24", { type: "json", ops: [{ op: "remove", path: "/spec/allocations/4" }] })
      yield* api.delete(R.OverlappingRangeIPReservations, RELEASE_POOLS, "10.167.0.4")

      const kubeconfig = yield* operatorKubeconfig(`release-operator-${ns}`)
      // The operator's credentials are that role's, nothing more.
      expect((yield* Effect.promise(() => rest(credentialsOf(kubeconfig), "GET", "/api/v1/namespaces/kube-system/secrets"))).status).toBe(403)
      const asOperator = (args: ReadonlyArray<string>, input?: string) =>
        Effect.promise(() => runCommand("release", { kubeconfig, namespace: RELEASE_POOLS, args, ...(input === undefined ? {} : { input }) }))
      const before = yield* poolEntries("10.167.0.0-24")
      const dry = yield* asOperator(["--from-report", report, "--dry-run", "--output", "json"])
      expect(dry.code, dry.stderr).toBe(1)
      expect(JSON.parse(dry.stdout).wouldFree).toEqual([
        { kind: "allocation", pool: "10.167.0.0-24", ip: "10.167.0.2", podref: `${ns}/gone` },
        { kind: "reservation", name: "10.167.0.2", ip: "10.167.0.2", podref: `${ns}/gone` }
      ])
      expect(yield* poolEntries("10.167.0.0-24")).toEqual(before)

      // The report on stdin, as `audit -o json | release --from-report -`.
      const done = yield* asOperator(["--from-report", "-", "--output", "json"], audited.stdout)
      expect(done.code, done.stderr).toBe(1)
      type Row = { result?: string; kind: string; ip: string; podref: string; reason: string }
      const out = JSON.parse(done.stdout) as { freed: ReadonlyArray<unknown>; alreadyFree: ReadonlyArray<Row>; skipped: ReadonlyArray<Row> }
      expect(out.freed).toEqual([
        { kind: "allocation", pool: "10.167.0.0-24", ip: "10.167.0.2", podref: `${ns}/gone` },
        { kind: "reservation", name: "10.167.0.2", ip: "10.167.0.2", podref: `${ns}/gone` }
      ])
      // Still held by a pod of that name: skipped, and the exit code 1. Freed by another since the report: already free.
      expect(out.skipped.map((r) => `${r.result} ${r.kind} ${r.ip} ${r.podref}: ${r.reason.replace(/[0-9a-f]{32}/g, "<id>").replace(/uid [0-9a-f-]{36}/, "uid <uid>")}`)).toEqual([
        `skipped allocation 10.167.0.3 ${ns}/reborn: changed since the report: container id <id> (was <id>): a pod of that name took it back`,
        `skipped reservation 10.167.0.3 ${ns}/reborn: no longer an orphan: pod ${ns}/reborn (uid <uid>) exists and may hold it`
      ])
      expect(out.alreadyFree.map((r) => `${r.kind} ${r.ip} ${r.podref}: ${r.reason}`)).toEqual([
        `allocation 10.167.0.4 ${ns}/freed: already freed: pool 10.167.0.0-24 holds no allocation of 10.167.0.4`,
        `reservation 10.167.0.4 ${ns}/freed: already deleted: no reservation 10.167.0.4`
      ])
      expect(logText(done.stderr)).not.toMatch(/forbidden|\b403\b/i)
      expect(yield* poolEntries("10.167.0.0-24")).toEqual({
        "10.167.0.1": { podref: `${ns}/keep`, id: pods.keep.containerId, ifname: "net1" },
        "10.167.0.3": { podref: `${ns}/reborn`, id: reborn.containerId, ifname: "net1" }
      })
      expect(yield* reservationView).toMatchObject({ "10.167.0.1": `${ns}/keep`, "10.167.0.3": `${ns}/reborn` })
      expect(Object.keys(yield* reservationView).filter((n) => n.startsWith("10.167."))).toEqual(["10.167.0.1", "10.167.0.3"])

      // A live holder named by hand: refused (nothing written), then freed with --force.
      const refused = yield* asOperator(["--pod", `${ns}/keep`])
      expect(refused.code, refused.stderr).toBe(1)
      expect(refused.stdout.split("\n").filter((l) => l.startsWith("refused "))).toHaveLength(2)
      expect(refused.stdout).toContain(`pod ${ns}/keep exists (uid ${pods.keep.uid}) and may run: refused (--force frees it anyway)`)
      expect(Object.keys(yield* poolEntries("10.167.0.0-24"))).toEqual(["10.167.0.1", "10.167.0.3"])
      const forced = yield* asOperator(["--pod", `${ns}/keep`, "--force"])
      expect(forced.code, forced.stderr).toBe(0)
      expect(forced.stdout).toContain("Freed 1 address and 1 reservation.")
      expect(Object.keys(yield* poolEntries("10.167.0.0-24"))).toEqual(["10.167.0.3"])
      expect(logText(forced.stderr)).not.toMatch(/forbidden|\b403\b/i)
      expect(yield* eventLines(ns)).toEqual([
        `Normal IPAddressGarbageCollected gone: ${gcMessage("10.167.0.2", "net")} (released by an operator)`,
        `Normal IPAddressGarbageCollected keep: ${gcMessage("10.167.0.1", "net")} (released by an operator with --force)`
      ])

      // Bad input: exit 2, one line naming the file, before the cluster is asked anything.
      const bad = yield* asOperator(["--from-report", path.join(path.dirname(report), "missing.json")])
      expect(bad.code).toBe(2)
      expect(bad.stdout).toBe("")
      expect(bad.stderr.trim().split("\n")).toEqual([expect.stringMatching(/^whereabouts-controller: --from-report .*missing\.json: cannot read it: ENOENT/)])
      const usage = yield* asOperator(["--ip", "10.167.0.0/24"])
      expect(usage.code).toBe(2)
      expect(usage.stderr).toContain('--ip "10.167.0.0/24": "24" is not an IP address')
    }).pipe(Effect.provide(liveWorld(RELEASE_POOLS))), 120_000)
  it.live("audit exits 0 on a clean cluster, 2 on bad usage (one line naming the flag, nothing asked of the cluster), 3 when the API server cannot be reached", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("clean")
      yield* ensureNamespace(CLEAN_POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.168.0.0/24" })
      yield* startPod(ns, "keep", [on(`${ns}/net`)])
      const clean = yield* run("audit", [], CLEAN_POOLS)
      expect(clean.code, clean.stderr).toBe(0)
      expect(clean.stdout).toContain("No orphaned allocations.")

      for (const [args, line] of [
        [["--terminating-grace", "1d"], 'whereabouts-controller: --terminating-grace (TERMINATING_GRACE) "1d": days are not a Go duration unit: write 24h; e.g. --terminating-grace 30s'],
        [["--concurrent-batches", "-3"], 'whereabouts-controller: --concurrent-batches (CONCURRENT_BATCHES) "-3": must be at least 1; e.g. --concurrent-batches 4'],
        [["-o", "yaml"], 'whereabouts-controller: --output (OUTPUT) "yaml": must be table or json; e.g. --output table']
      ] as const) {
        const usage = yield* run("audit", args, CLEAN_POOLS)
        expect(usage.code, usage.stderr).toBe(2)
        expect(usage.stdout).toBe("")
        expect(usage.stderr.trim().split("\n")).toEqual([line])
      }

      // A closed loopback port: nothing listens there.
      const closed = yield* Effect.promise(freePort)
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "unreachable-"))
      const kubeconfig = path.join(dir, "kubeconfig")
      fs.writeFileSync(
        kubeconfig,
        JSON.stringify({
          apiVersion: "v1",
          kind: "Config",
          clusters: [{ name: "c", cluster: { server: `http://127.0.0.1:${closed}`, "insecure-skip-tls-verify": true } }],
          users: [{ name: "u", user: { token: "unused" } }],
          contexts: [{ name: "c", context: { cluster: "c", user: "u" } }],
          "current-context": "c"
        })
      )
      const unreachable = yield* Effect.promise(() => runCommand("audit", { kubeconfig, namespace: CLEAN_POOLS, args: ["-o", "json"] }))
      expect(unreachable.code, unreachable.stderr).toBe(3)
      expect(unreachable.stdout).toBe("")
      expect(unreachable.stderr).toContain(`127.0.0.1:${closed}`)
      const missing = yield* Effect.promise(() => runCommand("audit", { kubeconfig: path.join(dir, "no-such-kubeconfig"), namespace: CLEAN_POOLS }))
      expect(missing.code, missing.stderr).toBe(3)
    }).pipe(Effect.provide(liveWorld(CLEAN_POOLS))), 60_000)

  it.live("release --from-report run twice on the same report exits 0 both times; the second run says each orphan is already free", () =>
    Effect.gen(function* () {
      const ns = uniqueNamespace("twice")
      yield* ensureNamespace(TWICE_POOLS)
      yield* ensureNamespace(ns)
      yield* createNad(ns, "net", { range: "10.169.0.0/24" })
      yield* startPod(ns, "keep", [on(`${ns}/net`)])
      yield* deletePod(yield* startPod(ns, "gone", [on(`${ns}/net`)]))
      const audited = yield* run("audit", ["-o", "json"], TWICE_POOLS)
      expect(audited.code, audited.stderr).toBe(1)
      const report = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "release-twice-")), "report.json")
      fs.writeFileSync(report, audited.stdout)

      const first = yield* run("release", ["--from-report", report], TWICE_POOLS)
      expect(first.code, first.stderr).toBe(0)
      expect(first.stdout).toContain("Freed 1 address and 1 reservation.")
      const second = yield* run("release", ["--from-report", report], TWICE_POOLS)
      expect(second.code, second.stderr).toBe(0)
      expect(second.stdout.split("\n").filter((l) => l.startsWith("already free ")).map((l) => l.replace(/\s{3,}/g, " | "))).toEqual([
        `already free | allocation | 10.169.0.0-24 | 10.169.0.2 | ${ns}/gone | already freed: pool 10.169.0.0-24 holds no allocation of 10.169.0.2`,
        `already free | reservation | 10.169.0.2 | 10.169.0.2 | ${ns}/gone | already deleted: no reservation 10.169.0.2`
      ])
      expect(second.stdout).toContain("Freed 0 addresses and 0 reservations; 2 already free.")
      const json = yield* run("release", ["--from-report", report, "-o", "json"], TWICE_POOLS)
      expect(json.code, json.stderr).toBe(0)
      expect(JSON.parse(json.stdout)).toMatchObject({ freed: [], skipped: [], alreadyFree: [{ kind: "allocation", ip: "10.169.0.2" }, { kind: "reservation", ip: "10.169.0.2" }] })
      expect(Object.keys(yield* poolEntries("10.169.0.0-24"))).toEqual(["10.169.0.1"])
    }).pipe(Effect.provide(liveWorld(TWICE_POOLS))), 60_000)
})
