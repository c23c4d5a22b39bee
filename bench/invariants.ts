/**
 * What one evaluation of the invariant monitor costs (src/domain/invariants.ts over a view like the
 * caches'): n running pods, each on `--per-pod` of ten whereabouts networks (one pool each,
 * overlapping-range reservations on), every address held and reserved, so nothing is reported and
 * the whole healthy path runs. Times the first evaluation (it judges each pool's order once) and
 * then `--runs` more (as between two evaluations where no pool changed; the controller skips those
 * while no cache changed), and the heap the entry lookup keeps between evaluations. Networks are
 * /14s, room for 262,142 pods.
 *
 *   node --expose-gc bench/invariants.ts [--pods 10000] [--per-pod 2] [--runs 20]
 *
 * Prints one JSON object. Not part of `npm run bench`: evidence for BENCHMARKS.md, taken on a quiet
 * machine (the monitor runs once a minute on the leader; what matters is that it stays well under
 * what moves the single-deletion p99 and RSS rows).
 */
import { Either } from "effect"
import { listedByIndex } from "../src/domain/claims.ts"
import { decodeNadConfig } from "../src/domain/ipam-config.ts"
import { formatIP } from "../src/domain/ip.ts"
import { type InvariantView, invariantViolations, makeEntryLookup, reservationNetworks } from "../src/domain/invariants.ts"
import { podRef, projectPod } from "../src/domain/pod.ts"
import { type ParsedPool, parsePool, reservationName } from "../src/domain/pool.ts"
import { poolNaming } from "../src/domain/holdings.ts"
import { takeNumber } from "./lib/args.ts"
import { percentiles } from "./lib/stats.ts"

const args = process.argv.slice(2)
const PODS = takeNumber(args, "--pods", 10_000)
const PER_POD = Math.min(10, takeNumber(args, "--per-pod", 2))
const RUNS = takeNumber(args, "--runs", 20)
const NETWORKS = 10
const gc = (globalThis as { gc?: () => void }).gc

const nads = Array.from({ length: NETWORKS }, (_, n) => ({
  namespace: "bench",
  name: `net${n}`,
  config: decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name: `net${n}`, type: "macvlan", ipam: { type: "whereabouts", range: `10.${4 * n}.0.0/14` } }))
}))

/** The world: pod i on networks i..i+PER_POD-1 (mod 10), at offset i+1 of each, held and reserved. */
const build = () => {
  const allocations: Array<Record<string, { id: string; podref: string; ifname: string }>> = Array.from({ length: NETWORKS }, () => ({}))
  const reservations = new Map<string, { name: string; resourceVersion: string; podref: string }>()
  const pods = Array.from({ length: PODS }, (_, i) => {
    const name = `pod-${i}`
    const status = [{ name: "cluster", interface: "eth0", ips: [`172.${16 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`], mac: "aa:bb:cc:dd:ee:ff", default: true, dns: {} }]
    for (let k = 0; k < PER_POD; k++) {
      const n = (i + k) % NETWORKS
      const offset = i + 1
      const ip = `10.${4 * n + (offset >> 16)}.${(offset >> 8) & 255}.${offset & 255}`
      allocations[n]![String(offset)] = { id: `sandbox-${i}`, podref: `bench/${name}`, ifname: `net${k + 1}` }
      const r = reservationName({ family: 4, value: BigInt((10 << 24) + ((4 * n) << 16) + offset) }, "")
      reservations.set(r, { name: r, resourceVersion: "1", podref: `bench/${name}` })
      status.push({ name: `bench/net${n}`, interface: `net${k + 1}`, ips: [`${ip}/14`], mac: "aa:bb:cc:dd:ee:01", default: false, dns: {} })
    }
    return projectPod({
      metadata: { namespace: "bench", name, uid: `uid-${i}`, annotations: { "k8s.v1.cni.cncf.io/network-status": JSON.stringify(status, null, 4) } },
      spec: { nodeName: `node-${i % 50}` },
      status: { phase: "Running" }
    })
  })
  const pools: Array<ParsedPool> = allocations.map((a, n) => parsePool({ metadata: { name: `10.${4 * n}.0.0-14` }, spec: { range: `10.${4 * n}.0.0/14`, allocations: a } }))
  return { pods, pools, reservations }
}

const { pods, pools, reservations } = build()
const byRef = new Map(pods.map((p) => [podRef(p), p] as const))
const byName = new Map(pools.map((p) => [p.name, p] as const))
const byNad = new Map(nads.map((n) => [`${n.namespace}/${n.name}`, n.config] as const))
const naming = poolNaming(nads, [])
const entryAt = makeEntryLookup()
const listedBy = listedByIndex(pods)
const view = (): InvariantView => ({
  pods,
  listedBy,
  pod: (ref) => byRef.get(ref),
  pools,
  pool: (name) => byName.get(name),
  reservation: (name) => reservations.get(name),
  nad: (namespace, name) => byNad.get(`${namespace}/${name}`),
  nodeSlice: naming.nodeSlice,
  entryAt,
  reservationNetwork: reservationNetworks(nads.map((n) => n.config), naming.origin)
})

const timed = (): number => {
  const start = performance.now()
  const found = invariantViolations(view())
  const ms = performance.now() - start
  if (found.length > 0) throw new Error(`the healthy world reports ${found.length} violations, e.g. ${found[0]!.message} (${formatIP(found[0]!.ip)})`)
  return ms
}

// The listing's index is built on first use: built here, so the heap read next is the lookup's alone.
listedBy({ family: 4, value: 0n })
gc?.()
const heapBefore = process.memoryUsage().heapUsed
const firstMs = timed()
gc?.()
const keptBytes = process.memoryUsage().heapUsed - heapBefore
const runs = Array.from({ length: RUNS }, timed)
const listings = PODS * PER_POD
process.stdout.write(
  `${JSON.stringify(
    {
      pods: PODS,
      listings,
      poolEntries: pools.reduce((n, p) => n + p.entries.length, 0),
      reservations: reservations.size,
      firstEvaluationMs: Number(firstMs.toFixed(1)),
      evaluationMs: Object.fromEntries(Object.entries(percentiles(runs)).map(([k, v]) => [k, Number(v.toFixed(1))])),
      usPerListing: Number(((percentiles(runs).p50 * 1000) / listings).toFixed(2)),
      lookupHeapMiB: gc === undefined ? "run with --expose-gc" : Number((keptBytes / 2 ** 20).toFixed(2)),
      nadsReadable: nads.every((n) => Either.isRight(n.config))
    },
    null,
    2
  )}\n`
)
