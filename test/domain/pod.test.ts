import { describe, expect, it } from "@effect/vitest"
import { NETWORK_STATUS_ANNOTATION } from "../../src/domain/multus.ts"
import { type PodProjection, podAttachments, podHoldsIP, podRef, projectPod, splitPodRef } from "../../src/domain/pod.ts"
import { ip, left, right } from "./helpers.ts"

const STATUS = "k8s.v1.cni.cncf.io/network-status"
const LEGACY = "k8s.v1.cni.cncf.io/networks-status"
const NETWORKS = "k8s.v1.cni.cncf.io/networks"

const status = JSON.stringify([
  { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.0.5"], default: true },
  { name: "ns/macvlan", interface: "net1", ips: ["10.0.0.5", "FD00:0::5"] },
  { name: "other/sriov", interface: "net2", ips: ["192.168.7.7/24"] }
])

const pod = (extra: Partial<PodProjection> = {}): PodProjection => ({ namespace: "ns", name: "p", uid: "u1", phase: "Running", ...extra })

describe("podRef / splitPodRef", () => {
  it("round-trip namespace/name", () => {
    expect(podRef({ namespace: "ns", name: "p" })).toBe("ns/p")
    expect(splitPodRef("ns/p")).toStrictEqual({ namespace: "ns", name: "p" })
  })

  it.each(["ns", "/p", "ns/", "a/b/c", ""])("splitPodRef(%j) is undefined", (ref) => {
    expect(splitPodRef(ref)).toBeUndefined()
  })
})

describe("projectPod", () => {
  it("keeps the fields the controller needs", () => {
    const projected = projectPod({
      metadata: {
        namespace: "ns",
        name: "p",
        uid: "u1",
        resourceVersion: "42",
        deletionTimestamp: new Date("2026-11-30T01:02:03Z"),
        annotations: { [STATUS]: status, [NETWORKS]: "macvlan@net1", unrelated: "x" }
      },
      spec: { nodeName: "node-a" },
      status: {
        phase: "Failed",
        reason: "Evicted",
        conditions: [
          { type: "Ready", status: "False", reason: "PodFailed" },
          { type: "DisruptionTarget", status: "True", reason: "DeletionByTaintManager" }
        ]
      }
    })
    expect(projected).toStrictEqual({
      namespace: "ns",
      name: "p",
      uid: "u1",
      resourceVersion: "42",
      deletionTimestamp: "2026-11-30T01:02:03.000Z",
      nodeName: "node-a",
      phase: "Failed",
      phaseReason: "Evicted",
      disruption: "DeletionByTaintManager",
      networkStatus: status,
      networks: "macvlan@net1"
    })
  })

  it.each([
    ["the legacy key when the new one is absent", { [LEGACY]: "legacy" }, "legacy"],
    ["the legacy key when the new one is empty", { [STATUS]: "", [LEGACY]: "legacy" }, "legacy"],
    ["the new key over the legacy one", { [STATUS]: "new", [LEGACY]: "legacy" }, "new"],
    ["nothing", {}, undefined]
  ])("network status from %s", (_, annotations, expected) => {
    expect(projectPod({ metadata: { annotations } }).networkStatus).toBe(expected)
  })

  it("an unreadable status's error names the annotation it came from (Events and audit say which to fix)", () => {
    const error = (annotations: Record<string, string>) => left(podAttachments(projectPod({ metadata: { namespace: "ns", name: "p", annotations } })))
    expect(error({ [STATUS]: "[{" }).annotation).toBe(STATUS)
    expect(error({ [LEGACY]: "[{" }).annotation).toBe(LEGACY)
    expect(error({ [STATUS]: "", [LEGACY]: "[{" }).annotation).toBe(LEGACY)
    expect(projectPod({ metadata: { annotations: { [STATUS]: "[]" } } })).not.toHaveProperty("legacyStatus")
  })

  it("caches network-status compacted: MAC and DNS dropped, the same attachments and holdings", () => {
    const written = JSON.stringify(
      (JSON.parse(status) as Array<Record<string, unknown>>).map((e, i) => ({ ...e, mac: `0a:58:00:00:00:0${i}`, dns: {} })),
      null,
      4
    )
    const cached = projectPod({ metadata: { namespace: "ns", name: "p", annotations: { [STATUS]: written } }, status: { phase: "Running" } })
    expect(cached.networkStatus).toBe(status)
    expect(right(podAttachments(cached))).toStrictEqual(right(podAttachments(pod({ networkStatus: written }))))
    expect(podHoldsIP(cached, ip("10.0.0.5"), "net1")).toBe("holds")
  })

  it("tolerates a pod without metadata, spec or status", () => {
    expect(projectPod({})).toMatchObject({ namespace: "", name: "", uid: "", nodeName: undefined, phase: undefined, networks: undefined })
    expect(projectPod({ spec: { nodeName: "" }, metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } })).toMatchObject({
      nodeName: undefined,
      deletionTimestamp: "2026-01-01T00:00:00Z"
    })
  })
})

describe("podAttachments", () => {
  it("takes network-status and skips default entries", () => {
    expect(right(podAttachments(pod({ networkStatus: status, networks: "ignored" })))).toStrictEqual([
      { namespace: "ns", name: "macvlan", interface: "net1" },
      { namespace: "other", name: "sriov", interface: "net2" }
    ])
  })

  it.each([
    ["status missing", {}],
    ["status []", { networkStatus: "[]" }],
    ["status blank", { networkStatus: "  " }]
  ])("%s → the networks selection", (_, extra) => {
    expect(right(podAttachments(pod({ ...extra, networks: "macvlan, other/sriov@net2" })))).toStrictEqual([
      { namespace: "ns", name: "macvlan", interface: undefined },
      { namespace: "other", name: "sriov", interface: "net2" }
    ])
  })

  it("both missing → none", () => {
    expect(right(podAttachments(pod()))).toStrictEqual([])
  })

  it("a malformed status is an AnnotationError, not a crash", () => {
    const error = left(podAttachments(pod({ networkStatus: "[{", networks: "macvlan" })))
    expect(error.annotation).toBe(NETWORK_STATUS_ANNOTATION)
  })

  it("a malformed selection is an AnnotationError", () => {
    expect(left(podAttachments(pod({ networks: "a/b/c" }))).annotation).toBe(NETWORKS)
  })
})

describe("podHoldsIP", () => {
  it.each([
    ["listed on its interface", pod({ networkStatus: status }), "10.0.0.5", "net1", "holds"],
    ["IPv6 compared as addresses, not strings", pod({ networkStatus: status }), "fd00::5", "net1", "holds"],
    ["status IP with a prefix length", pod({ networkStatus: status }), "192.168.7.7", "net2", "holds"],
    ["listed, no ifname asked", pod({ networkStatus: status }), "10.0.0.5", undefined, "holds"],
    ["not listed, interface listed", pod({ networkStatus: status }), "10.0.0.6", "net1", "not-held"],
    ["not listed, no ifname", pod({ networkStatus: status }), "10.0.0.6", undefined, "not-held"],
    // whereabouts as the pod network's own IPAM (a KubeVirt VM's; upstream #638): a live pod holds its default-network address.
    ["on the default network", pod({ networkStatus: status }), "10.244.0.5", "eth0", "holds"],
    ["on the default network, an entry without ifname (before whereabouts 0.8), several networks", pod({ networkStatus: status }), "10.244.0.5", undefined, "holds"],
    ["interface not listed (may be coming up)", pod({ networkStatus: status }), "10.0.0.6", "net3", "unknown"],
    ["pending without status", pod({ phase: "Pending" }), "10.0.0.5", "net1", "unknown"],
    ["pending with a status that lacks the IP", pod({ phase: "Pending", networkStatus: status }), "10.0.0.6", "net1", "unknown"],
    ["running without status", pod(), "10.0.0.5", "net1", "unknown"],
    ["malformed status", pod({ networkStatus: "[{" }), "10.0.0.5", "net1", "unknown"],
    ["status with only the default network", pod({ networkStatus: '[{"name":"k8s-pod-network","default":true}]' }), "10.0.0.5", "net1", "unknown"],
    ["empty status", pod({ networkStatus: "[]" }), "10.0.0.5", "net1", "unknown"]
  ] as const)("%s → %s", (_, p, address, ifname, expected) => {
    expect(podHoldsIP(p, ip(address), ifname)).toBe(expected)
  })
})

describe("projectPod: what the never-run-again rule reads", () => {
  it("a DisruptionTarget condition counts only while true", () => {
    const pod = (status: string) => projectPod({ metadata: { name: "p" }, status: { conditions: [{ type: "DisruptionTarget", status, reason: "DeletionByTaintManager" }] } })
    expect(pod("True").disruption).toBe("DeletionByTaintManager")
    expect(pod("False").disruption).toBeUndefined()
  })
})
