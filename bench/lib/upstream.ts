/**
 * whereabouts' own pod controller (bench/upstream/controlloop, built by
 * scripts/upstream-controlloop.sh) as a contender on the real API server, and the mass deletion
 * that runs it and the controller on the same pods, one after the other. Upstream sees only pods
 * of its NODENAME, an existing Node (so every pod sits on one Node object), and refuses a network
 * without a flat file: the NADs name one (`configuration_path`) giving the bench's kubeconfig.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Either, type Scope } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { apiserverRequests, type BenchPlane, cpuSeconds } from "./controlplane.ts"
import { type BenchEnv, cpuDelta, type Limits, limitsAt, SHIPPED } from "./env.ts"
import { ROOT } from "./paths.ts"
import { freePort } from "../../test/live/cluster.ts"
import { spawnLogged } from "./proc.ts"
import { delta, parseProm, type Sample, sum } from "./prom.ts"
import { type Row, row, type Section, table, yesNo } from "./report.ts"
import { cpuText, fullyFreed, medSpread, poolPatches, ratio, sec } from "./rows.ts"
import { fmt, ms, spread } from "./stats.ts"
import { callsBetween, serverCallsBetween, total, waitUntil, writes } from "./scenarios.ts"
import { type Network, clearPools, deleteAll, ignoreExists, makeTracker, networks, restCheck, startPods, violations, wrongAndLost } from "./world.ts"

/** The Node every pod of this scenario is bound to, and upstream's NODENAME. */
export const NODE = "bench-upstream-node"

const UPSTREAM_API = "controlloop_api_requests_total"
const FREED = "whereabouts_controller_ips_freed_total"

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

interface Handle {
  readonly pid: number
  readonly scrape: () => Promise<ReadonlyArray<Sample>>
  /** Requests between two scrapes, "verb resource code", without watches. */
  readonly callsBetween: (a: ReadonlyArray<Sample>, b: ReadonlyArray<Sample>) => Record<string, number>
  /** Freed IPs (ours: its counter, bumped after the Events) or Events written (upstream) so far. */
  readonly done: (s: ReadonlyArray<Sample>) => number
}

/** Starts the upstream program for the scope (`limits` undefined: client-go's defaults); resolves once its caches synced. */
const startUpstream = (bin: string, o: { readonly kubeconfig: string; readonly limits: Limits | undefined; readonly logDir: string; readonly label: string }) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const url = `http://127.0.0.1:${await freePort()}`
        const env = {
          KUBECONFIG: o.kubeconfig,
          NODENAME: NODE,
          WHEREABOUTS_NAMESPACE: "kube-system",
          METRICS_ADDR: url.slice("http://".length),
          ...(o.limits === undefined ? {} : { API_QPS: String(o.limits.qps), API_BURST: String(o.limits.burst) })
        }
        const p = spawnLogged(bin, [], env, path.join(o.logDir, `${o.label}.log`), `${url}/readyz`, 20_000)
        await p.ready()
        return {
          pid: p.pid,
          stop: p.stop,
          scrape: async () => parseProm(await (await fetch(`${url}/metrics`)).text(), (n) => n === UPSTREAM_API),
          callsBetween: (a, b) => Object.fromEntries(Object.entries(delta(a, b, UPSTREAM_API, ["verb", "resource", "code"])).filter(([k]) => !k.startsWith("watch "))),
          done: (s) => sum(s, UPSTREAM_API, (l) => l["resource"] === "events" && (l["verb"] === "create" || l["verb"] === "patch") && (l["code"] ?? "").startsWith("2"))
        } satisfies Handle & { readonly stop: () => Promise<void> }
      },
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    }),
    (p) => Effect.promise(() => p.stop())
  )

const startOurs = (env: BenchEnv, limits: Limits, label: string) =>
  Effect.map(
    env.start("ours", limits, label),
    (c): Handle => ({
      pid: c.proc.pid,
      scrape: () => Effect.runPromise(c.scrape),
      callsBetween,
      done: (s) => sum(s, FREED)
    })
  )

export type UpstreamKind = "ours" | "upstream"

interface UpstreamOptions {
  readonly kind: UpstreamKind
  readonly pods: number
  readonly pools: number
  /** undefined: client-go's defaults (upstream as released). */
  readonly limits: Limits | undefined
  readonly label: string
  /** The flat file the NADs name (written by `upstreamComparison`). */
  readonly flatFile: string
}

const withFlatFile = (n: Network, flatFile: string): Network => {
  const config = JSON.parse(n.config) as { ipam: Record<string, unknown> }
  return { ...n, config: JSON.stringify({ ...config, ipam: { ...config.ipam, configuration_path: flatFile } }) }
}

const ensureNode = Effect.flatMap(KubeApi, (api) => ignoreExists(api.create(R.Nodes, undefined, { metadata: { name: NODE, labels: { "kubernetes.io/hostname": NODE } } })))

/** Every pod of a fresh namespace named `o.label` (all on NODE) deleted at once without CNI DEL, under the contender `start` starts; times until all their addresses are free. */
const upstreamMass = (env: BenchEnv, plane: BenchPlane, start: Effect.Effect<Handle, Error, Scope.Scope>, o: UpstreamOptions) =>
  Effect.gen(function* () {
    const ns = o.label
    yield* ensureNode
    const { started, refs } = yield* startPods(ns, networks(ns, o.pools).map((n) => withFlatFile(n, o.flatFile)), o.pods, 1, NODE)
    const run = yield* Effect.scoped(
      Effect.gen(function* () {
        const t1 = performance.now()
        const c = yield* start
        const startMs = performance.now() - t1
        const tracker = yield* makeTracker()
        yield* tracker.allHeld(refs, o.pods)
        const m0 = yield* Effect.promise(c.scrape)
        const s0 = yield* Effect.promise(() => apiserverRequests(plane))
        const cpuOf = () => ({ ...env.cpu(), contender: cpuSeconds(c.pid) })
        const cpu0 = cpuOf()
        const del = yield* deleteAll(started)
        const freed = yield* tracker.allFreed(refs, 30 * 60_000, del.lastReturned)
        const eventsAt = yield* Effect.promise(() => waitUntil(async () => c.done(await c.scrape()) - c.done(m0), o.pods, Number.isNaN(freed.pool) ? 1 : 120_000))
        // Let the last writes (Events, a lease release) land before counting.
        yield* Effect.sleep("1 second")
        const m1 = yield* Effect.promise(c.scrape)
        const s1 = yield* Effect.promise(() => apiserverRequests(plane))
        const cpu = cpuDelta(cpu0, cpuOf())
        const rest = yield* restCheck(ns)
        return {
          kind: o.kind,
          label: o.label,
          pods: o.pods,
          pools: o.pools,
          limits: o.limits,
          startMs,
          deleteWindowMs: del.lastReturned - del.firstIssued,
          poolFreedMs: freed.pool,
          reservationsFreedMs: freed.reservations,
          // Last delete returned → ours: its freed-IP counter reached the count; upstream: as many Events written.
          eventsMs: eventsAt - del.lastReturned,
          calls: c.callsBetween(m0, m1),
          serverCalls: serverCallsBetween(s0, s1),
          cpu,
          rest
        }
      })
    )
    yield* clearPools
    return run
  })

type UpstreamRun = Effect.Effect.Success<ReturnType<typeof upstreamMass>>

export interface ComparisonOptions {
  readonly pods: number
  readonly pools: number
  readonly reps: number
  readonly log: (line: string) => void
}

type Runner = <A>(f: (env: BenchEnv) => Effect.Effect<A, Error, KubeApi | Scope.Scope>) => Promise<A>

/** The limit both run at in the second pair of runs (the first: each as released). */
export const RAISED = limitsAt(500)

const limitText = (l: Limits | undefined) =>
  l === undefined ? "client-go default (QPS 5/burst 10 per API group client)" : l.qps > 0 ? `QPS ${l.qps}/burst ${l.burst}` : "no client cap"
const medianOf = (runs: ReadonlyArray<UpstreamRun>, f: (r: UpstreamRun) => number) => spread(runs.map(f)).median

/**
 * The upstream pod controller and the controller on the same kind of world (`pods` pods on one
 * node, `pools` pools, deleted at once), each as released and then both at RAISED; `reps`
 * times, alternating. A string when the upstream binary cannot be had.
 */
export const upstreamComparison = async (plane: BenchPlane, logDir: string, run: Runner, o: ComparisonOptions) => {
  const binary = upstreamBinary()
  if (Either.isLeft(binary)) return binary.left
  const flatFile = path.join(logDir, "whereabouts.conf")
  fs.writeFileSync(flatFile, `${JSON.stringify({ datastore: "kubernetes", kubernetes: { kubeconfig: plane.kubeconfigPath } }, null, 2)}\n`)
  const settings = [
    { name: "released", upstream: undefined, ours: SHIPPED },
    { name: "raised", upstream: RAISED, ours: RAISED }
  ] as const
  const runs: Array<UpstreamRun & { readonly setting: string }> = []
  for (let i = 0; i < o.reps; i++) {
    for (const s of settings) {
      for (const kind of ["upstream", "ours"] as const) {
        const label = `up-${kind}-${s.name}-${i}`
        const limits = kind === "ours" ? s.ours : s.upstream
        const r = await run((e) => {
          const start = kind === "ours" ? startOurs(e, s.ours, label) : startUpstream(binary.right.path, { kubeconfig: plane.kubeconfigPath, limits, logDir, label })
          return upstreamMass(e, plane, start, { kind, pods: o.pods, pools: o.pools, limits, label, flatFile })
        })
        runs.push({ ...r, setting: s.name })
        o.log(`  ${kind} (${limitText(limits)}) #${i + 1}: all free ${sec(fullyFreed(r))} after the last delete; requests: ${breakdown(r.calls)}`)
      }
    }
  }
  return { binary: binary.right, flatFile, runs, ...report(binary.right, runs, o) }
}

const breakdown = (c: Record<string, number>) =>
  Object.entries(c)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, n]) => `${k}: ${n}`)
    .join(", ")


const report = (binary: UpstreamBinary, runs: ReadonlyArray<UpstreamRun & { readonly setting: string }>, o: ComparisonOptions): { rows: Array<Row>; section: Section } => {
  const pick = (setting: string, kind: UpstreamKind) => runs.filter((r) => r.setting === setting && r.kind === kind)
  const rows: Array<Row> = []
  const version = binary.version.split(" ").slice(-1)[0] ?? "?"
  for (const [setting, text] of [
    ["released", `each as released: upstream at ${limitText(undefined)}, ours at ${limitText(SHIPPED)}`],
    ["raised", `both at ${limitText(RAISED)}`]
  ] as const) {
    const ours = pick(setting, "ours")
    const up = pick(setting, "upstream")
    if (ours.length === 0 && up.length === 0) continue
    const scenario = `mass deletion, ${o.pods} pods / ${o.pools} pools on one node; baseline column: upstream whereabouts ${version} pod controller; ${text}`
    const per = (rs: ReadonlyArray<UpstreamRun>, f: (c: Record<string, number>) => number) => medianOf(rs, (r) => f(r.calls) / r.pods)
    const perIP = (metric: string, f: (c: Record<string, number>) => number) => row(scenario, metric, { ours: fmt(per(ours, f)), baseline: fmt(per(up, f)), ratio: ratio(per(up, f), per(ours, f)) })
    const rest = (rs: ReadonlyArray<UpstreamRun>) => rs.map((r) => wrongAndLost(r.rest).join(" / ")).join(", ")
    rows.push(
      row(scenario, "last delete → every address and reservation free, median (min–max)", {
        ours: medSpread(ours.map(fullyFreed), sec),
        baseline: medSpread(up.map(fullyFreed), sec),
        ratio: ratio(medianOf(up, fullyFreed), medianOf(ours, fullyFreed))
      }),
      perIP("API requests per freed IP, the contender's own count (no watches; upstream's Lease calls are its per-IP lock)", total),
      perIP("API writes per freed IP (same count)", writes),
      row(scenario, "wrong / lost frees at rest (invariants), all runs", { ours: rest(ours), baseline: rest(up), target: "0 / 0", met: yesNo(ours.every((r) => violations(r.rest) === 0)) })
    )
  }
  const detail = table(
    ["run", "limit", "pods / pools", "deletes (window)", "→ pool entries free", "→ reservations free", "→ Events written", "requests (contender)", "per freed IP", "requests (API server)", "pool patches (422)", "CPU s (by process)", "invariants at rest"],
    runs.map((r) => [
      `${r.kind} ${r.setting}`,
      limitText(r.limits),
      `${r.pods} / ${r.pools}`,
      ms(r.deleteWindowMs),
      sec(r.poolFreedMs),
      sec(r.reservationsFreedMs),
      sec(r.eventsMs),
      total(r.calls),
      fmt(total(r.calls) / r.pods),
      total(r.serverCalls),
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
    body: `The pod controller of the whereabouts release itself (package \`pkg/controlloop\`, ${binary.version}), run by our small main in \`bench/upstream/controlloop\` (built by \`scripts/upstream-controlloop.sh\`) with the informer factories, clientsets and event recorder its own binary builds, from the bench's kubeconfig instead of the in-cluster config; its cron reconciler is not started. It frees only pods of its own node (\`NODENAME\`; in a cluster one instance runs per node), so the ${o.pods} pods of each run sit on one Node object, and its NADs name a flat file (\`configuration_path\`) giving the kubeconfig, which upstream requires. Both contenders get the same world: pods started by \`bulkStart\` over ${o.pools} pools, then all deleted at once (grace 0, no CNI DEL), timed by the benchmark's own watch. "→ Events written": ours, when its \`ips_freed_total\` reached the count; upstream, when it had written as many Events. Requests are each contender's own count over the run (upstream's from a counting transport under client-go's rate limiters); watches are left out, and so are the controller's leader-election lease renewals, while upstream's Lease reads and writes are its per-IP lock and count. "Requests (API server)" is \`apiserver_request_total\` over the same window, everything but watches and the benchmark's pod deletions. Upstream as released runs at client-go's default limit, since its binary sets none: then every API group's client gets a token bucket of its own, QPS 5/burst 10 (core, coordination for the Lease, whereabouts, NADs); with \`API_QPS\`/\`API_BURST\` our main sets the limit, and client-go shares one bucket per clientset.\n\n${detail}\n\n${calls}`
  }
  return { rows, section }
}
