/**
 * whereabouts' own pod controller (bench/upstream/controlloop, built by
 * scripts/upstream-controlloop.sh) as a contender on the real API server, and the comparison that
 * runs scenarios.ts's mass deletion under it and under the controller, one after the other.
 * Upstream sees only pods of its NODENAME, an existing Node (so every pod sits on one Node
 * object), and refuses a network without a flat file: the NADs name one (`configuration_path`)
 * giving the bench's kubeconfig.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Either, type Scope } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { apiserverRequests, type BenchPlane, procMemory } from "./controlplane.ts"
import { type BenchEnv, type Contender, type Limits, limitsAt, type Reading, SHIPPED } from "./env.ts"
import { ROOT } from "./paths.ts"
import { freePort } from "../../test/live/cluster.ts"
import { spawnLogged } from "./proc.ts"
import { delta, parseProm, sum } from "./prom.ts"
import { type Row, row, type Section, table, yesNo } from "./report.ts"
import { breakdown, cpuText, fullyFreed, limitsText, medSpread, perIPRow, poolPatches, ratio, sec } from "./rows.ts"
import { fmt, ms, spread } from "./stats.ts"
import { massDeletion, type MassRun, total, writes } from "./scenarios.ts"
import { type Network, ignoreExists, violations, wrongAndLost } from "./world.ts"

/** The Node every pod of this scenario is bound to, and upstream's NODENAME. */
export const NODE = "bench-upstream-node"

const UPSTREAM_API = "controlloop_api_requests_total"

export interface UpstreamBinary {
  readonly path: string
  /** What the binary says it links, e.g. `github.com/k8snetworkplumbingwg/whereabouts v0.9.2`. */
  readonly version: string
}

/** The binary from scripts/upstream-controlloop.sh (UPSTREAM_CONTROLLOOP, the cache, or a build), or why there is none. */
export const upstreamBinary = (): Either.Either<UpstreamBinary, string> => {
  try {
    const bin = execFileSync("bash", [path.join(ROOT, "scripts/upstream-controlloop.sh")], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim()
    if (bin === "") return Either.left("scripts/upstream-controlloop.sh printed no path")
    const version = execFileSync(bin, ["-version"], { encoding: "utf8" }).trim()
    return Either.right({ path: bin, version })
  } catch (e) {
    const status = (e as { status?: number }).status
    return Either.left(status === 3 ? "not cached and UPSTREAM_CONTROLLOOP_NO_BUILD is set" : `scripts/upstream-controlloop.sh failed: ${(e as Error).message.split("\n")[0]}`)
  }
}

/** Upstream's scrapes: its counting transport's requests (its Lease calls are its per-IP lock, so they count) and the Events it wrote. */
const UPSTREAM_READING: Reading = {
  calls: (a, b) => Object.fromEntries(Object.entries(delta(a, b, UPSTREAM_API, ["verb", "resource", "code"])).filter(([k]) => !k.startsWith("watch "))),
  eventsOut: (s) => sum(s, UPSTREAM_API, (l) => l["resource"] === "events" && (l["verb"] === "create" || l["verb"] === "patch") && (l["code"] ?? "").startsWith("2"))
}

/** Starts the upstream program for the scope (a `perGroup` limit: none set, client-go's default); resolves once its caches synced. */
const startUpstream = (bin: string, o: { readonly kubeconfig: string; readonly limits: Limits; readonly logDir: string; readonly label: string }) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const url = `http://127.0.0.1:${await freePort()}`
        const env = {
          KUBECONFIG: o.kubeconfig,
          NODENAME: NODE,
          WHEREABOUTS_NAMESPACE: "kube-system",
          METRICS_ADDR: url.slice("http://".length),
          ...(o.limits.perGroup === true ? {} : { API_QPS: String(o.limits.qps), API_BURST: String(o.limits.burst) })
        }
        return { url, p: spawnLogged(bin, [], env, path.join(o.logDir, `${o.label}.log`), `${url}/readyz`, 20_000) }
      },
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    }),
    ({ p }) => Effect.promise(() => p.stop())
  ).pipe(
    Effect.tap(({ p }) => Effect.tryPromise({ try: () => p.ready(), catch: (e) => (e instanceof Error ? e : new Error(String(e))) })),
    Effect.map(({ url, p }): Contender => ({
      proc: { pid: p.pid, memory: () => procMemory(p.pid) },
      scrape: Effect.promise(async () => parseProm(await (await fetch(`${url}/metrics`)).text(), (n) => n === UPSTREAM_API)),
      reading: UPSTREAM_READING
    }))
  )

export type UpstreamKind = "ours" | "upstream"

/** `e` with upstream's pod controller beside ours. */
const withUpstream = (e: BenchEnv, bin: string, kubeconfig: string, logDir: string): BenchEnv<UpstreamKind> => ({
  cpu: e.cpu,
  start: (kind, limits, label) => (kind === "ours" ? e.start("ours", limits, label) : startUpstream(bin, { kubeconfig, limits, logDir, label }))
})

/** Upstream's NADs name the flat file it requires (`configuration_path`). */
const withFlatFile = (flatFile: string) => (n: Network): Network => {
  const config = JSON.parse(n.config) as { ipam: Record<string, unknown> }
  return { ...n, config: JSON.stringify({ ...config, ipam: { ...config.ipam, configuration_path: flatFile } }) }
}

const ensureNode = Effect.flatMap(KubeApi, (api) => ignoreExists(api.create(R.Nodes, undefined, { metadata: { name: NODE, labels: { "kubernetes.io/hostname": NODE } } })))

type UpstreamRun = MassRun & { readonly kind: UpstreamKind; readonly setting: string }

export interface ComparisonOptions {
  readonly pods: number
  readonly pools: number
  readonly reps: number
  readonly log: (line: string) => void
}

type Runner = <A>(f: (env: BenchEnv) => Effect.Effect<A, Error, KubeApi | Scope.Scope>) => Promise<A>

/** The limit both run at in the second pair of runs (the first: each as released). */
export const RAISED = limitsAt(500)
/** Upstream as released: its binary sets no limit. */
const CLIENT_GO_DEFAULT: Limits = { qps: 5, burst: 10, perGroup: true }

const medianOf = (runs: ReadonlyArray<UpstreamRun>, f: (r: UpstreamRun) => number) => spread(runs.map(f)).median

/**
 * The upstream pod controller and the controller on the same kind of world (`pods` pods on one
 * node, `pools` pools, deleted at once), each as released and then both at RAISED; `reps`
 * times, alternating. A string when the upstream binary cannot be had.
 */
export const upstreamComparison = async (plane: BenchPlane, logDir: string, run: Runner, o: ComparisonOptions) => {
  const binary = upstreamBinary()
  if (Either.isLeft(binary)) return binary.left
  const serverCounts = () => apiserverRequests(plane)
  const flatFile = path.join(logDir, "whereabouts.conf")
  fs.writeFileSync(flatFile, `${JSON.stringify({ datastore: "kubernetes", kubernetes: { kubeconfig: plane.kubeconfigPath } }, null, 2)}\n`)
  const settings = [
    { name: "released", upstream: CLIENT_GO_DEFAULT, ours: SHIPPED },
    { name: "raised", upstream: RAISED, ours: RAISED }
  ] as const
  const env = (e: BenchEnv) => withUpstream(e, binary.right.path, plane.kubeconfigPath, logDir)
  const runs: Array<UpstreamRun> = []
  for (let i = 0; i < o.reps; i++) {
    for (const s of settings) {
      for (const kind of ["upstream", "ours"] as const) {
        const label = `up-${kind}-${s.name}-${i}`
        const limits = kind === "ours" ? s.ours : s.upstream
        const options = { pods: o.pods, pools: o.pools, perPod: 1, limits, label, nodeName: NODE, network: withFlatFile(flatFile), serverCounts, timeoutMs: 30 * 60_000 }
        const r = await run((e) => Effect.zipRight(ensureNode, massDeletion(env(e), kind, options)))
        runs.push({ ...r, setting: s.name })
        o.log(`  ${kind} (${limitsText(limits)}) #${i + 1}: all free ${sec(fullyFreed(r))} after the last delete; requests: ${breakdown(r.calls)}`)
      }
    }
  }
  return { binary: binary.right, flatFile, runs, ...report(binary.right, runs, o) }
}

const report = (binary: UpstreamBinary, runs: ReadonlyArray<UpstreamRun>, o: ComparisonOptions): { rows: Array<Row>; section: Section } => {
  const pick = (setting: string, kind: UpstreamKind) => runs.filter((r) => r.setting === setting && r.kind === kind)
  const rows: Array<Row> = []
  const version = binary.version.split(" ").slice(-1)[0] ?? "?"
  for (const [setting, text] of [
    ["released", `each as released: upstream at ${limitsText(CLIENT_GO_DEFAULT)}, ours at ${limitsText(SHIPPED)}`],
    ["raised", `both at ${limitsText(RAISED)}`]
  ] as const) {
    const ours = pick(setting, "ours")
    const up = pick(setting, "upstream")
    if (ours.length === 0 && up.length === 0) continue
    const scenario = `mass deletion, ${o.pods} pods / ${o.pools} pools on one node; baseline column: upstream whereabouts ${version} pod controller; ${text}`
    const rest = (rs: ReadonlyArray<UpstreamRun>) => rs.map((r) => wrongAndLost(r.rest).join(" / ")).join(", ")
    rows.push(
      row(scenario, "last delete → every address and reservation free, median (min–max)", {
        ours: medSpread(ours.map(fullyFreed), sec),
        baseline: medSpread(up.map(fullyFreed), sec),
        ratio: ratio(medianOf(up, fullyFreed), medianOf(ours, fullyFreed))
      }),
      perIPRow(scenario, "API requests per freed IP, the contender's own count (no watches; upstream's Lease calls are its per-IP lock)", ours, up, (r) => total(r.calls)),
      perIPRow(scenario, "API writes per freed IP (same count)", ours, up, (r) => writes(r.calls)),
      row(scenario, "wrong / lost frees at rest (invariants), all runs", { ours: rest(ours), baseline: rest(up), target: "0 / 0", met: yesNo(ours.every((r) => violations(r.rest) === 0)) })
    )
  }
  const detail = table(
    ["run", "limit", "pods / pools", "deletes (window)", "→ pool entries free", "→ reservations free", "→ Events written", "requests (contender)", "per freed IP", "requests (API server)", "pool patches (422)", "CPU s (by process)", "invariants at rest"],
    runs.map((r) => [
      `${r.kind} ${r.setting}`,
      limitsText(r.limits),
      `${r.pods} / ${r.pools}`,
      ms(r.deleteWindowMs),
      sec(r.poolFreedMs),
      sec(r.reservationsFreedMs),
      sec(r.eventsMs),
      total(r.calls),
      fmt(total(r.calls) / r.pods),
      total(r.serverCalls ?? {}),
      poolPatches(r.calls),
      cpuText(r.cpu),
      violations(r.rest) === 0 ? "ok" : `${violations(r.rest)} violations`
    ])
  )
  const calls = table(
    ["run", "the contender's requests, verb resource code"],
    runs.map((r) => [`${r.kind} ${r.setting}`, breakdown(r.calls)])
  )
  const section: Section = {
    title: `Upstream's pod controller (whereabouts ${version}) on the same API server`,
    body: `The pod controller of the whereabouts release itself (package \`pkg/controlloop\`, ${binary.version}), run by our small main in \`bench/upstream/controlloop\` (built by \`scripts/upstream-controlloop.sh\`) with the informer factories, clientsets and event recorder its own binary builds, from the bench's kubeconfig instead of the in-cluster config; its cron reconciler is not started. It frees only pods of its own node (\`NODENAME\`; in a cluster one instance runs per node), so the ${o.pods} pods of each run sit on one Node object, and its NADs name a flat file (\`configuration_path\`) giving the kubeconfig, which upstream requires. Both contenders get the same world: pods started by \`bulkStart\` over ${o.pools} pools, then all deleted at once (grace 0, no CNI DEL), timed by the benchmark's own watch. "→ Events written": when the contender had written an Event for every freed address (ours: its \`events_total{result="written"}\`; upstream: its successful Event creates and patches). Requests are each contender's own count over the run (upstream's from a counting transport under client-go's rate limiters); watches are left out, and so are the controller's leader-election lease renewals, while upstream's Lease reads and writes are its per-IP lock and count. "Requests (API server)" is \`apiserver_request_total\` over the same window, everything but watches and the benchmark's pod deletions. Upstream as released runs at client-go's default limit, since its binary sets none: then every API group's client gets a token bucket of its own, QPS 5/burst 10 (core, coordination for the Lease, whereabouts, NADs); with \`API_QPS\`/\`API_BURST\` our main sets the limit, and client-go shares one bucket per clientset.\n\n${detail}\n\n${calls}`
  }
  return { rows, section }
}
