/**
 * The simulation cannot drift: the same ADD/DEL sequences go through the upstream whereabouts CNI
 * plugin (v0.9.2, a process, as a runtime runs it) and through the project's simulation of it
 * (cniAdd/cniDel over the live KubeApi), on the same API server, each into a pools namespace of its
 * own, and what they write is compared: every pool (its range, offset → podref, ifname and
 * container id, the ids mapped back to the sequence's names for them) and every reservation (name →
 * podref, ifname and a container id if it has one: upstream writes none), plus each ADD's addresses
 * and whether each call failed.
 *
 * Every case must write the same in both: the differences issue #17 found (and one more) are gone,
 * each case's comment says where upstream goes beyond the allocation rules, and a new difference
 * fails the case with its lines.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { formatIP } from "../../src/domain/ip.ts"
import { listAll } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"
import { cniAdd, cniDel } from "../../src/testing/cni-plugin.ts"
import { describeWithPlugin, pluginBinary, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { newContainerId, pluginAdd, pluginDel, pluginNode } from "./support/upstream-plugin.ts"
import { ensureNamespace, liveWorld } from "./support/world.ts"

/** The namespace of the pods the sequences name (no pod objects: the plugin never reads them). */
const APPS = "apps"

interface Step {
  readonly op: "ADD" | "DEL"
  readonly pod: string
  /** A name for the sandbox; each world gets a container id of its own for it. */
  readonly container: string
  /** Key of the case's `nads`. */
  readonly nad: string
  readonly ifname?: string
  /** What upstream's ADD returns: its addresses, or "error". Checked, so a case says what it exercises. */
  readonly upstream?: ReadonlyArray<string> | "error"
}

interface Case {
  readonly name: string
  /** NAD `spec.config`s by key. */
  readonly nads: Readonly<Record<string, string>>
  readonly steps: ReadonlyArray<Step>
}

const wb = (ipam: Record<string, unknown>, name = "net") => JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", master: "eth0", ipam: { type: "whereabouts", ...ipam } })
const add = (pod: string, container: string, nad: string, upstream?: Step["upstream"], ifname?: string): Step => ({
  op: "ADD",
  pod,
  container,
  nad,
  ...(upstream === undefined ? {} : { upstream }),
  ...(ifname === undefined ? {} : { ifname })
})
const del = (pod: string, container: string, nad: string, ifname?: string): Step => ({ op: "DEL", pod, container, nad, ...(ifname === undefined ? {} : { ifname }) })

const CASES: ReadonlyArray<Case> = [
  {
    name: "IPv4: fill a /29, free one in the middle, refill, exhaust; a /31 has no address",
    nads: { n: wb({ range: "10.50.0.0/29" }), tiny: wb({ range: "10.50.1.0/31" }) },
    steps: [
      add("a", "c1", "n", ["10.50.0.1"]),
      add("b", "c2", "n", ["10.50.0.2"]),
      add("c", "c3", "n", ["10.50.0.3"]),
      del("b", "c2", "n"),
      add("d", "c4", "n", ["10.50.0.2"]),
      add("e", "c5", "n", ["10.50.0.4"]),
      add("f", "c6", "n", ["10.50.0.5"]),
      add("g", "c7", "n", ["10.50.0.6"]),
      add("h", "c8", "n", "error"),
      del("a", "c1", "n"),
      add("h", "c9", "n", ["10.50.0.1"]),
      add("t", "c10", "tiny", "error")
    ]
  },
  {
    name: "IPv6: fill a /125, free the first, refill",
    nads: { n: wb({ range: "fd00:51::/125" }) },
    steps: [
      add("a", "c1", "n", ["fd00:51::1"]),
      add("b", "c2", "n", ["fd00:51::2"]),
      del("a", "c1", "n"),
      add("c", "c3", "n", ["fd00:51::1"]),
      ...["d", "e", "f", "g"].map((p, i) => add(p, `c${i + 4}`, "n", [`fd00:51::${i + 3}`])),
      add("h", "c8", "n", "error")
    ]
  },
  {
    name: "dual stack: one address per range, freed together",
    nads: { ds: wb({ ipRanges: [{ range: "10.52.0.0/24" }, { range: "fd00:52::/64" }] }) },
    steps: [add("a", "c1", "ds", ["10.52.0.1", "fd00:52::1"]), add("b", "c2", "ds", ["10.52.0.2", "fd00:52::2"]), del("a", "c1", "ds"), add("c", "c3", "ds", ["10.52.0.1", "fd00:52::1"])]
  },
  {
    name: "range plus ipRanges, CIDRs not in network form, upper-case and uncompressed IPv6",
    nads: { m: wb({ range: "10.53.0.77/24", ipRanges: [{ range: "FD00:0053:0:0::5/64" }] }) },
    steps: [add("a", "c1", "m", ["10.53.0.1", "fd00:53::1"]), add("b", "c2", "m", ["10.53.0.2", "fd00:53::2"]), del("a", "c1", "m")]
  },
  {
    name: "named networks sharing a CIDR with each other and an unnamed network",
    nads: { blue: wb({ range: "10.54.0.0/24", network_name: "blue" }), green: wb({ range: "10.54.0.0/24", network_name: "green" }), plain: wb({ range: "10.54.0.0/24" }) },
    steps: [
      add("a", "c1", "blue", ["10.54.0.1"]),
      add("b", "c2", "green", ["10.54.0.1"]),
      add("c", "c3", "plain", ["10.54.0.1"]),
      add("d", "c4", "blue", ["10.54.0.2"]),
      del("a", "c1", "blue"),
      add("e", "c5", "blue", ["10.54.0.1"])
    ]
  },
  {
    name: "exclude, range_start/range_end (in range, outside it, reversed), the start-CIDR form, per-range bounds in ipRanges",
    nads: {
      bounded: wb({ range: "10.55.0.0/24", range_start: "10.55.0.10", range_end: "10.55.0.20", exclude: ["10.55.0.10/31", "10.55.0.13"] }),
      window: wb({ range: "10.55.1.5-10.55.1.7/24", exclude: ["10.55.1.6"] }),
      outside: wb({ range: "10.55.2.0/24", range_start: "10.55.3.1", range_end: "10.55.2.0" }),
      reversed: wb({ range: "10.55.4.0/29", range_start: "10.55.4.5", range_end: "10.55.4.2" }),
      v6: wb({ ipRanges: [{ range: "fd00:55::/120", range_start: "fd00:55::10", range_end: "fd00:55::12", exclude: ["fd00:55::11/128"] }] })
    },
    steps: [
      add("a", "c1", "bounded", ["10.55.0.12"]),
      add("b", "c2", "bounded", ["10.55.0.14"]),
      add("c", "c3", "window", ["10.55.1.5"]),
      add("d", "c4", "window", ["10.55.1.7"]),
      add("e", "c5", "window", "error"),
      add("f", "c6", "outside", ["10.55.2.1"]),
      add("g", "c7", "reversed", ["10.55.4.5"]),
      add("h", "c8", "reversed", ["10.55.4.6"]),
      add("i", "c9", "reversed", "error"),
      add("j", "c10", "v6", ["fd00:55::10"]),
      add("k", "c11", "v6", ["fd00:55::12"]),
      add("l", "c12", "v6", "error"),
      del("b", "c2", "bounded"),
      add("m", "c13", "bounded", ["10.55.0.14"])
    ]
  },
  {
    name: "overlapping ranges on and off",
    nads: { wide: wb({ range: "10.56.0.0/24" }), narrow: wb({ range: "10.56.0.0/25" }), flat: wb({ range: "10.56.0.0/26", enable_overlapping_ranges: false }) },
    steps: [
      add("a", "c1", "wide", ["10.56.0.1"]),
      add("b", "c2", "narrow", ["10.56.0.2"]),
      add("c", "c3", "flat", ["10.56.0.1"]),
      del("a", "c1", "wide"),
      add("d", "c4", "narrow", ["10.56.0.1"]),
      del("c", "c3", "flat"),
      add("e", "c5", "wide", ["10.56.0.3"])
    ]
  },
  {
    name: "a re-ADD of the same podref and ifname (a new sandbox): the same address, the new container id; DEL of the old sandbox frees nothing",
    nads: {
      n: wb({ range: "10.57.0.0/24" }),
      shrunk: wb({ range: "10.57.0.0/24", range_start: "10.57.0.10", exclude: ["10.57.0.2"] }),
      ds: wb({ ipRanges: [{ range: "10.57.1.0/24" }, { range: "fd00:57::/64" }] })
    },
    steps: [
      add("a", "c1", "n", ["10.57.0.1"]),
      add("b", "c2", "n", ["10.57.0.2"]),
      add("a", "c3", "n", ["10.57.0.1"]),
      add("a", "c3", "n", ["10.57.0.3"], "net2"),
      del("a", "c1", "n"),
      del("a", "c3", "n"),
      add("a", "c4", "n", ["10.57.0.1"]),
      add("x", "c5", "ds", ["10.57.1.1", "fd00:57::1"]),
      add("x", "c6", "ds", ["10.57.1.1", "fd00:57::1"]),
      // The pod's own address no longer in the range's bounds: the re-ADD still returns it.
      add("b", "c7", "shrunk", ["10.57.0.2"])
    ]
  },
  {
    name: "DEL of an unknown container: on a range never used, of a known pod's other sandbox, on the wrong ifname",
    nads: { n: wb({ range: "10.58.0.0/24" }), unused: wb({ range: "10.58.1.0/24" }) },
    // Upstream's DEL reads the pool through the same get-or-create as its ADD: a DEL on a range
    // never used leaves an empty pool.
    steps: [del("z", "c9", "unused"), add("a", "c1", "n", ["10.58.0.1"]), del("z", "c9", "n"), del("a", "c2", "n"), del("a", "c1", "n", "net2")]
  },
  {
    name: "a conflist: the whereabouts plugin of the list, with the list's name and cniVersion",
    nads: {
      list: JSON.stringify({
        cniVersion: "1.0.0",
        name: "list",
        plugins: [{ type: "macvlan", master: "eth0", ipam: { type: "whereabouts", range: "10.59.0.0/24" } }, { type: "tuning" }]
      })
    },
    steps: [add("a", "c1", "list", ["10.59.0.1"]), add("b", "c2", "list", ["10.59.0.2"]), del("a", "c1", "list")]
  },
  {
    name: "a NAD edited to put a range in front, then the pod's DEL",
    nads: { before: wb({ range: "10.60.1.0/24" }), after: wb({ ipRanges: [{ range: "10.60.0.0/24" }, { range: "10.60.1.0/24" }] }) },
    // Upstream's DEL gets (creating it) the pool of the first range, finds no entry of the
    // container there and stops: the ranges after it are never looked at, so the pod's entry and
    // reservation in the second range stay (for the controller to free).
    steps: [add("a", "c1", "before", ["10.60.1.1"]), add("b", "c2", "before", ["10.60.1.2"]), del("a", "c1", "after")]
  },
  {
    name: "a NAD edited to add an IPv6 range, then a re-ADD of its pod; another range overlapping the new one",
    nads: {
      v4: wb({ ipRanges: [{ range: "10.61.0.0/24" }] }),
      dual: wb({ ipRanges: [{ range: "10.61.0.0/24" }, { range: "fd00:61::/64" }] }),
      v6: wb({ range: "fd00:61::/120" })
    },
    // Upstream's ADD keeps one "reservation already mine" flag for all ranges: once the first
    // range finds the pod's own reservation (the re-ADD), no later range writes one, so the new
    // fd00:61::1 is left without a reservation and the overlapping range hands it to b as well (two
    // pods, one address).
    steps: [add("a", "c1", "v4", ["10.61.0.1"]), add("a", "c2", "dual", ["10.61.0.1", "fd00:61::1"]), add("b", "c3", "v6", ["fd00:61::1"])]
  },
  {
    name: "a dual-stack NAD edited to turn overlapping ranges on, then the pod's DEL",
    nads: {
      off: wb({ ipRanges: [{ range: "10.64.0.0/24" }, { range: "fd00:64::/64" }], enable_overlapping_ranges: false }),
      on: wb({ ipRanges: [{ range: "10.64.0.0/24" }, { range: "fd00:64::/64" }] })
    },
    // Upstream's DEL stops at an error of its reservation delete: there is none (overlapping was
    // off at ADD), so the NotFound ends the DEL after the first range (the plugin still reports
    // success) and the IPv6 entry stays.
    steps: [add("a", "c1", "off", ["10.64.0.1", "fd00:64::1"]), add("b", "c2", "off", ["10.64.0.2", "fd00:64::2"]), del("a", "c1", "on")]
  },
  {
    name: "a NAD edited to turn overlapping ranges on, then the DEL of a pod whose address another range's pod reserved",
    nads: { wide: wb({ range: "10.66.0.0/24" }), off: wb({ range: "10.66.0.0/26", enable_overlapping_ranges: false }), on: wb({ range: "10.66.0.0/26" }) },
    // Upstream's DEL deletes the freed address's reservation by name, whoever holds it: b's DEL
    // removes a's, and c is then handed 10.66.0.1 too (two pods, one address).
    steps: [add("a", "c1", "wide", ["10.66.0.1"]), add("b", "c2", "off", ["10.66.0.1"]), del("b", "c2", "on"), add("c", "c3", "on", ["10.66.0.1"])]
  },
  {
    name: "a NAD edited to turn overlapping ranges off, then the pod's DEL: its reservation stays and still blocks the address",
    nads: { on: wb({ range: "10.65.0.0/24" }), off: wb({ range: "10.65.0.0/24", enable_overlapping_ranges: false }) },
    steps: [add("a", "c1", "on", ["10.65.0.1"]), del("a", "c1", "off"), add("b", "c2", "on", ["10.65.0.2"]), add("a", "c3", "on", ["10.65.0.1"])]
  },
  {
    name: "a NAD edited to turn overlapping ranges on while its pod's address is reserved by another range's pod, then a re-ADD of that pod",
    nads: { wide: wb({ range: "10.63.0.0/24" }), off: wb({ range: "10.63.0.0/26", enable_overlapping_ranges: false }), on: wb({ range: "10.63.0.0/26" }) },
    // Upstream's re-ADD finds b's entry (idempotent), sees another pod's reservation on it, and
    // retries the same answer until its 10 s request deadline: the ADD fails, the pool keeps b's
    // old container id.
    steps: [add("a", "c1", "wide", ["10.63.0.1"]), add("b", "c2", "off", ["10.63.0.1"]), add("b", "c3", "on", "error")]
  },
  {
    name: "IPv4 text with leading zeros: in a CIDR, a top-level range_start, an ipRanges range_start, an exclude (a new address, a re-ADD, a DEL)",
    nads: {
      cidr: wb({ range: "010.62.3.0/24" }),
      top: wb({ range: "10.62.2.0/24", range_start: "10.62.2.05" }),
      entry: wb({ ipRanges: [{ range: "10.62.0.0/24", range_start: "10.62.0.010" }] }),
      exclude: wb({ range: "10.62.1.0/24", exclude: ["10.62.1.01"] }),
      plain: wb({ range: "10.62.1.0/24" }),
      later: wb({ ipRanges: [{ range: "10.62.4.0/24" }, { range: "10.62.5.0/24", exclude: ["10.62.5.01/32"] }] })
    },
    // Upstream reads CIDRs and the top-level range_start leniently, but an ipRanges entry's
    // range_start/range_end and every exclude strictly: the first fails the config before any
    // write; an exclude is parsed only when a new address is looked for, after the range's pool was
    // read (created), so the ranges before it keep what they got, and a re-ADD of the pod's own
    // address and a DEL go through.
    steps: [
      add("a", "c1", "cidr", ["10.62.3.1"]),
      add("b", "c2", "top", ["10.62.2.5"]),
      add("c", "c3", "entry", "error"),
      add("d", "c4", "exclude", "error"),
      add("e", "c5", "plain", ["10.62.1.1"]),
      add("e", "c6", "exclude", ["10.62.1.1"]),
      del("e", "c6", "exclude"),
      add("f", "c7", "later", "error")
    ]
  }
]

interface Written {
  /** Pool name → its range and offset → "podref ifname container" (the id as the sequence names it). */
  readonly pools: Readonly<Record<string, { readonly range: string; readonly allocations: Readonly<Record<string, string>> }>>
  /** Reservation name → "podref ifname", then "containerid <the id as the sequence names it>" when it has one. */
  readonly reservations: Readonly<Record<string, string>>
  /** Per step: the ADD's addresses or "error", "ok"/"error" for a DEL. */
  readonly outcomes: ReadonlyArray<ReadonlyArray<string> | string>
}

const sortedRecord = <V>(entries: ReadonlyArray<readonly [string, V]>): Record<string, V> =>
  Object.fromEntries([...entries].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })))

/** What one world wrote, read back from the API server. */
const readWorld = (namespace: string, nameOf: (id: string) => string) =>
  Effect.gen(function* () {
    const pools = yield* listAll(R.IPPools, namespace)
    const reservations = yield* listAll(R.OverlappingRangeIPReservations, namespace)
    const spec = (o: { readonly [k: string]: unknown }) => o["spec"] as Record<string, unknown>
    return {
      pools: sortedRecord(
        pools.items.map((p) => {
          const s = spec(p) as { range: string; allocations?: Record<string, { id: string; podref: string; ifname?: string }> }
          const allocations = sortedRecord(Object.entries(s.allocations ?? {}).map(([k, a]) => [k, `${a.podref} ${a.ifname ?? "-"} ${nameOf(a.id)}`] as const))
          return [p.metadata.name, { range: s.range, allocations }] as const
        })
      ),
      reservations: sortedRecord(
        reservations.items.map((r) => {
          const s = spec(r)
          const id = typeof s["containerid"] === "string" ? ` containerid ${nameOf(s["containerid"])}` : ""
          return [r.metadata.name, `${s["podref"]} ${s["ifname"] ?? "-"}${id}`] as const
        })
      )
    }
  })

/** Container ids of one world: a fresh id per name, and the way back. */
const containers = () => {
  const ids = new Map<string, string>()
  const names = new Map<string, string>()
  return {
    idOf: (name: string) => {
      let id = ids.get(name)
      if (id === undefined) {
        id = newContainerId()
        ids.set(name, id)
        names.set(id, name)
      }
      return id
    },
    nameOf: (id: string) => names.get(id) ?? (id === "" ? "(empty)" : `(unknown ${id})`)
  }
}

const describePool = (p: Written["pools"][string] | undefined) =>
  p === undefined
    ? "none"
    : `{range ${p.range}, ${Object.keys(p.allocations).length === 0 ? "no allocations" : Object.entries(p.allocations).map(([k, v]) => `${k}: ${v}`).join(", ")}}`

/** Every difference, one line each, in a fixed order. */
const compare = (steps: ReadonlyArray<Step>, up: Written, sim: Written): Array<string> => {
  const out: Array<string> = []
  steps.forEach((s, i) => {
    const [u, m] = [JSON.stringify(up.outcomes[i]), JSON.stringify(sim.outcomes[i])]
    if (u !== m) out.push(`step ${i + 1} ${s.op} ${s.pod}/${s.ifname ?? "net1"} (${s.container}) on ${s.nad}: upstream ${u}, simulation ${m}`)
  })
  for (const name of [...new Set([...Object.keys(up.pools), ...Object.keys(sim.pools)])].sort()) {
    const [u, m] = [up.pools[name], sim.pools[name]]
    if (u === undefined || m === undefined || u.range !== m.range) {
      if (JSON.stringify(u) !== JSON.stringify(m)) out.push(`pool ${name}: upstream ${describePool(u)}, simulation ${describePool(m)}`)
      continue
    }
    for (const key of [...new Set([...Object.keys(u.allocations), ...Object.keys(m.allocations)])].sort((a, b) => Number(a) - Number(b))) {
      const [ua, ma] = [u.allocations[key], m.allocations[key]]
      if (ua !== ma) out.push(`pool ${name} offset ${key}: upstream ${ua ?? "none"}, simulation ${ma ?? "none"}`)
    }
  }
  for (const name of [...new Set([...Object.keys(up.reservations), ...Object.keys(sim.reservations)])].sort()) {
    const [u, m] = [up.reservations[name], sim.reservations[name]]
    if (u !== m) out.push(`reservation ${name}: upstream ${u ?? "none"}, simulation ${m ?? "none"}`)
  }
  return out
}

/** Runs the steps against one allocator; a failed call is an outcome, not a test failure. */
const runSteps = <E, R>(
  c: Case,
  idOf: (name: string) => string,
  call: (op: Step["op"], req: { podNamespace: string; podName: string; containerId: string; ifname: string; config: string }) => Effect.Effect<ReadonlyArray<string>, E, R>
) =>
  Effect.forEach(c.steps, (s) =>
    Effect.map(Effect.either(call(s.op, { podNamespace: APPS, podName: s.pod, containerId: idOf(s.container), ifname: s.ifname ?? "net1", config: c.nads[s.nad]! })), (r) =>
      Either.isLeft(r)
        ? { outcome: "error", why: r.left instanceof Error ? r.left.message : String(r.left) }
        : { outcome: s.op === "ADD" ? r.right : "ok", why: "" }
    )
  )

describeWithPlugin("the simulation cannot drift: the same ADD/DEL sequences through the upstream plugin and through cniAdd/cniDel write the same", () => {
  const kubeconfig = () => runningEnvtest().kubeconfigPath

  const runCase = (c: Case) =>
    Effect.gen(function* () {
      const [upNs, simNs] = [uniqueNamespace("contract-up"), uniqueNamespace("contract-sim")]
      yield* Effect.provide(Effect.all([ensureNamespace(upNs), ensureNamespace(simNs)]), liveWorld(upNs))
      const upIds = containers()
      const simIds = containers()

      const upOutcomes = yield* runSteps(c, upIds.idOf, (op, req) => (op === "ADD" ? pluginAdd(req) : Effect.as(pluginDel(req), []))).pipe(
        Effect.provide(pluginNode({ binary: pluginBinary(), kubeconfig: kubeconfig(), namespace: upNs }))
      )
      const simOutcomes = yield* runSteps(c, simIds.idOf, (op, req) => (op === "ADD" ? Effect.map(cniAdd(req), (ips) => ips.map(formatIP)) : Effect.as(cniDel(req), []))).pipe(
        Effect.provide(liveWorld(simNs))
      )
      const read = (ns: string, nameOf: (id: string) => string) => Effect.provide(readWorld(ns, nameOf), liveWorld(ns))
      const up: Written = { ...(yield* read(upNs, upIds.nameOf)), outcomes: upOutcomes.map((o) => o.outcome) }
      const sim: Written = { ...(yield* read(simNs, simIds.nameOf)), outcomes: simOutcomes.map((o) => o.outcome) }

      // Why calls failed, for a failing case's report.
      const failures = (os: typeof upOutcomes) => os.flatMap((o, i) => (o.why === "" ? [] : [`step ${i + 1}: ${o.why}`]))
      console.info(`${c.name}\n  upstream failures: ${JSON.stringify(failures(upOutcomes))}\n  simulation failures: ${JSON.stringify(failures(simOutcomes))}`)
      // What upstream did is what the case says it exercises.
      c.steps.forEach((s, i) => {
        if (s.upstream !== undefined) expect(up.outcomes[i], `step ${i + 1} (${s.op} ${s.pod}) upstream ${upOutcomes[i]!.why}`).toEqual(s.upstream)
      })

      expect(compare(c.steps, up, sim)).toEqual([])
    })

  for (const c of CASES) it.live(c.name, () => runCase(c), 60_000)

})
