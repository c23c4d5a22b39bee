import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { decodeNadConfig } from "../../src/domain/ipam-config.ts"
import { type NodeSlicePoolRecord, nodeSlicePoolName, poolOrigins, sliceNetworks, sliceOfNode, slicePoolName } from "../../src/domain/node-slices.ts"
import { parsePool } from "../../src/domain/pool.ts"

const config = (ipam: Record<string, unknown>, name = "slicenet") => {
  const decoded = decodeNadConfig(JSON.stringify({ cniVersion: "0.3.1", name, type: "macvlan", ipam: { type: "whereabouts", ...ipam } }))
  if (Either.isLeft(decoded) || decoded.right._tag !== "Whereabouts") throw new Error("test config does not decode")
  return decoded.right.config
}
const nsp = (name: string, range: string, allocations: ReadonlyArray<[string, string]>): NodeSlicePoolRecord => ({
  name,
  resourceVersion: "1",
  range,
  sliceSize: "/24",
  allocations: allocations.map(([nodeName, sliceRange]) => ({ nodeName, sliceRange }))
})
const pool = (name: string, range: string) => parsePool({ metadata: { name }, spec: { range, allocations: {} } })

describe("node-slice names", () => {
  it.each([
    ["10.0.1.0/24", "worker-1", "", "worker-1-10.0.1.0-24"],
    ["10.0.1.0/24", "worker-1", "storage", "storage-worker-1-10.0.1.0-24"],
    ["2001:db8:0:1::/64", "w", "", "w-2001-db8-0-1---64"]
  ])("slice %s on %s, network %j → %s", (slice, node, network, name) => {
    expect(slicePoolName(slice, node, network)).toBe(name)
  })

  it("the NodeSlicePool is named after network_name, else the config's name", () => {
    expect(nodeSlicePoolName(config({ range: "10.0.0.0/16", node_slice_size: "/24", network_name: "storage" }))).toBe("storage")
    expect(nodeSlicePoolName(config({ range: "10.0.0.0/16", node_slice_size: "/24" }, "macvlan-net"))).toBe("macvlan-net")
  })

  it("a node's slice, none for a free slice or an unknown node", () => {
    const p = nsp("n", "10.0.0.0/16", [["worker-1", "10.0.1.0/24"], ["", "10.0.2.0/24"]])
    expect(sliceOfNode(p, "worker-1")).toBe("10.0.1.0/24")
    expect(sliceOfNode(p, "")).toBeUndefined()
    expect(sliceOfNode(p, "worker-9")).toBeUndefined()
    expect(sliceOfNode(undefined, "worker-1")).toBeUndefined()
  })
})

describe("poolOrigins", () => {
  const unnamed = config({ range: "10.0.0.0/16", node_slice_size: "/24" }, "slicenet")
  const named = config({ range: "10.1.0.0/16", node_slice_size: "/24", network_name: "storage" })
  const slices = [nsp("slicenet", "10.0.0.0/16", [["worker-1", "10.0.1.0/24"], ["", "10.0.2.0/24"], ["worker-3", "10.0.3.0/24"]]), nsp("storage", "10.1.0.0/16", [["worker-1", "10.1.5.0/24"]])]
  const origin = poolOrigins(sliceNetworks([unnamed, named], slices))

  it("a slice a NodeSlicePool gives a node: its network, node and slice (not a network named after the node)", () => {
    expect(origin(pool("worker-1-10.0.1.0-24", "10.0.1.0/24"))).toEqual({ _tag: "Slice", network: "", node: "worker-1", slice: "10.0.1.0/24", nodeSlicePool: "slicenet", owner: "current" })
    expect(origin(pool("storage-worker-1-10.1.5.0-24", "10.1.5.0/24"))).toEqual({ _tag: "Slice", network: "storage", node: "worker-1", slice: "10.1.5.0/24", nodeSlicePool: "storage", owner: "current" })
  })

  it("a node deleted (its slice freed) or the slice given to another node: stale", () => {
    expect(origin(pool("worker-2-10.0.2.0-24", "10.0.2.0/24"))).toMatchObject({ _tag: "Slice", network: "", node: "worker-2", owner: "stale" })
    expect(origin(pool("worker-1-10.0.3.0-24", "10.0.3.0/24"))).toMatchObject({ _tag: "Slice", node: "worker-1", owner: "stale" })
    expect(origin(pool("storage-worker-9-10.1.7.0-24", "10.1.7.0/24"))).toMatchObject({ _tag: "Slice", network: "storage", node: "worker-9", owner: "stale" })
  })

  it("the NodeSlicePool gone: read from the name through the NAD, owner unknown", () => {
    const withoutPools = poolOrigins(sliceNetworks([unnamed, named], []))
    expect(withoutPools(pool("worker-1-10.0.1.0-24", "10.0.1.0/24"))).toMatchObject({ _tag: "Slice", network: "", node: "worker-1", owner: "unknown" })
    expect(withoutPools(pool("storage-worker-1-10.1.5.0-24", "10.1.5.0/24"))).toMatchObject({ _tag: "Slice", network: "storage", node: "worker-1", owner: "unknown" })
  })

  it("no NAD known: both name forms of a NodeSlicePool's slices resolve", () => {
    const poolsOnly = poolOrigins(sliceNetworks([], slices))
    expect(poolsOnly(pool("worker-1-10.0.1.0-24", "10.0.1.0/24"))).toMatchObject({ network: "", node: "worker-1", owner: "current" })
    expect(poolsOnly(pool("storage-worker-1-10.1.5.0-24", "10.1.5.0/24"))).toMatchObject({ network: "storage", node: "worker-1", owner: "current" })
  })

  it("whole-range pools stay whole-range pools, also when a NAD writes one whose name looks like a slice's", () => {
    expect(origin(pool("10.9.0.0-24", "10.9.0.0/24"))).toEqual({ _tag: "Range", network: "" })
    expect(origin(pool("other-10.9.0.0-24", "10.9.0.0/24"))).toEqual({ _tag: "Range", network: "other" })
    // "net1-10.0.7.0-24" inside the unnamed slice network's range reads as a slice of node "net1"...
    expect(origin(pool("net1-10.0.7.0-24", "10.0.7.0/24"))).toMatchObject({ _tag: "Slice", node: "net1" })
    // ...unless a NAD writes it as a whole range of network net1.
    const known = poolOrigins(sliceNetworks([unnamed], slices), (name) => name === "net1-10.0.7.0-24")
    expect(known(pool("net1-10.0.7.0-24", "10.0.7.0/24"))).toEqual({ _tag: "Range", network: "net1" })
  })

  it("a pool outside every node-slice range is a whole-range pool", () => {
    expect(origin(pool("worker-1-10.5.0.0-24", "10.5.0.0/24"))).toEqual({ _tag: "Range", network: "worker-1" })
  })
})
