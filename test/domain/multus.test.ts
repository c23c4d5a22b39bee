import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import {
  LEGACY_NETWORK_STATUS_ANNOTATION,
  MAX_ANNOTATION_BYTES,
  NETWORK_STATUS_ANNOTATION,
  NETWORKS_ANNOTATION,
  type NetworkStatusEntry,
  compactNetworkStatus,
  decodeNetworkSelection,
  decodeNetworkStatus,
  readNetworkStatus,
  statusAttachment
} from "../../src/domain/multus.ts"
import { left, right } from "./helpers.ts"

describe("annotation names", () => {
  it("are the Multus keys", () => {
    expect(NETWORK_STATUS_ANNOTATION).toBe("k8s.v1.cni.cncf.io/network-status")
    expect(LEGACY_NETWORK_STATUS_ANNOTATION).toBe("k8s.v1.cni.cncf.io/networks-status")
    expect(NETWORKS_ANNOTATION).toBe("k8s.v1.cni.cncf.io/networks")
    expect(MAX_ANNOTATION_BYTES).toBe(256 * 1024)
  })
})

describe("decodeNetworkStatus", () => {
  it("decodes a status with a default and a secondary entry", () => {
    const text = JSON.stringify([
      { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.1.5"], mac: "aa:bb", default: true, dns: {} },
      { name: "ns/macvlan", interface: "net1", ips: ["10.0.0.5", "fd00::5"], mac: "cc:dd", dns: {}, "device-info": { type: "pci" }, extra: 1 }
    ])
    expect(right(decodeNetworkStatus(text))).toStrictEqual([
      { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.1.5"], mac: "aa:bb", default: true, dns: {} },
      { name: "ns/macvlan", interface: "net1", ips: ["10.0.0.5", "fd00::5"], mac: "cc:dd", dns: {}, "device-info": { type: "pci" } }
    ])
  })

  it.each([
    ['[{"name":"ns/a","interface":"net1"}]', [{ name: "ns/a", interface: "net1" }]],
    ['[{"name":"ns/a","ips":null}]', [{ name: "ns/a", ips: null }]],
    ["[]", []],
    ['  [{"name":"ns/a"}]  ', [{ name: "ns/a" }]]
  ])("decodes %s", (text, expected) => {
    expect(right(decodeNetworkStatus(text))).toStrictEqual(expected)
  })

  it.each([
    "[{",
    "",
    "null",
    "42",
    '{"name":"ns/a"}',
    '[{"name":5}]',
    '[{"interface":"net1"}]',
    '[{"name":"ns/a","ips":"10.0.0.1"}]',
    '[{"name":"ns/a","ips":[1]}]',
    '[{"name":"ns/a","default":"true"}]'
  ])("rejects %j with an AnnotationError naming the annotation", (text) => {
    const error = left(decodeNetworkStatus(text))
    expect(error._tag).toBe("AnnotationError")
    expect(error.annotation).toBe(NETWORK_STATUS_ANNOTATION)
    expect(error.message).not.toBe("")
  })

  it("names the legacy annotation when asked to", () => {
    expect(left(decodeNetworkStatus("[{", LEGACY_NETWORK_STATUS_ANNOTATION)).annotation).toBe(LEGACY_NETWORK_STATUS_ANNOTATION)
  })

  it("refuses annotations over MAX_ANNOTATION_BYTES without parsing them", () => {
    const atLimit = `[${" ".repeat(MAX_ANNOTATION_BYTES - 2)}]`
    expect(right(decodeNetworkStatus(atLimit))).toStrictEqual([])
    const error = left(decodeNetworkStatus(`[${" ".repeat(MAX_ANNOTATION_BYTES - 1)}]`))
    expect(error.annotation).toBe(NETWORK_STATUS_ANNOTATION)
    expect(error.message).toContain(String(MAX_ANNOTATION_BYTES))
  })
})

describe("decodeNetworkSelection", () => {
  const a = (namespace: string, name: string, iface?: string) => ({ namespace, name, interface: iface })

  it.each([
    ["a", [a("pods", "a")]],
    ["ns/a", [a("ns", "a")]],
    ["ns/a@net1", [a("ns", "a", "net1")]],
    ["a@net1", [a("pods", "a", "net1")]],
    [" a , ns/b@net2 ,c", [a("pods", "a"), a("ns", "b", "net2"), a("pods", "c")]],
    ["a,a", [a("pods", "a"), a("pods", "a")]],
    ["", []],
    ['[{"name":"a"}]', [a("pods", "a")]],
    ['  [{"name":"a","namespace":"other","interface":"net1","ips":["10.0.0.9/24"]}]', [a("other", "a", "net1")]],
    ['[{"name":"a","namespace":"","interface":""},{"name":"b","namespace":"x"}]', [a("pods", "a"), a("x", "b")]]
  ])("%j", (text, expected) => {
    expect(right(decodeNetworkSelection(text, "pods"))).toStrictEqual(expected)
  })

  it.each(["a/b/c", "a@b@c", "ns/", "/a", "@net1", "a@", "ns/a@net1/x", "a b", '[{"namespace":"x"}]', "[{", '[{"name":5}]'])(
    "rejects %j",
    (text) => {
      const error = left(decodeNetworkSelection(text, "pods"))
      expect(error._tag).toBe("AnnotationError")
      expect(error.annotation).toBe(NETWORKS_ANNOTATION)
    }
  )
})

describe("statusAttachment", () => {
  it.each([
    [{ name: "ns/macvlan", interface: "net1" }, { namespace: "ns", name: "macvlan", interface: "net1" }],
    [{ name: "macvlan" }, { namespace: "pods", name: "macvlan", interface: undefined }]
  ])("%j", (entry, expected) => {
    expect(statusAttachment(entry, "pods")).toStrictEqual(expected)
  })
})

describe("compactNetworkStatus", () => {
  // What Multus writes (json.MarshalIndent): indented, with MAC, DNS and device info.
  const multus = JSON.stringify(
    [
      { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.1.7"], mac: "0a:58:0a:f4:01:07", default: true, dns: {} },
      {
        name: "ns/macvlan",
        interface: "net1",
        ips: ["10.0.0.5", "fd00::5"],
        mac: "5e:0c:1a:2b:3c:4d",
        dns: { nameservers: ["10.0.0.1"] },
        "device-info": { type: "pci", version: "1.1.0", pci: { "pci-address": "0000:03:02.4" } },
        gateway: ["10.0.0.1"]
      }
    ],
    null,
    "    "
  )
  const kept = (text: string) =>
    right(decodeNetworkStatus(text)).map((e) => ({ name: e.name, interface: e.interface, ips: e.ips, default: e.default }))

  it("keeps what decides anything and drops the rest", () => {
    const compact = compactNetworkStatus(multus)
    expect(compact.length).toBeLessThan(multus.length / 2)
    expect(JSON.parse(compact)).toStrictEqual([
      { name: "k8s-pod-network", interface: "eth0", ips: ["10.244.1.7"], default: true },
      { name: "ns/macvlan", interface: "net1", ips: ["10.0.0.5", "fd00::5"] }
    ])
    expect(kept(compact)).toStrictEqual(kept(multus))
  })

  it.each([
    ["malformed JSON", '[{"name": "a"'],
    ["not an array", '{"name":"a"}'],
    ["an array with a non-object", '[{"name":"a","mac":"x"}, 3]'],
    ["an array with an array", '[{"name":"a","mac":"x"}, []]'],
    ["blank", "   "],
    ["already compact", '[{"name":"a","interface":"net1"}]']
  ])("returns %s as it is", (_, text) => {
    expect(compactNetworkStatus(text)).toBe(text)
  })

  it("returns an annotation over the size limit as it is, so it is still refused", () => {
    const big = JSON.stringify([{ name: "a", mac: "0a:58:00:00:00:01", dns: { search: ["x".repeat(MAX_ANNOTATION_BYTES)] } }])
    expect(compactNetworkStatus(big)).toBe(big)
    left(decodeNetworkStatus(compactNetworkStatus(big)))
  })

  it("keeps a MAC that is not a string, so the entry is refused as before", () => {
    const text = JSON.stringify([{ name: "a", interface: "net1", mac: 7, dns: {} }])
    left(decodeNetworkStatus(text))
    left(decodeNetworkStatus(compactNetworkStatus(text)))
  })

  it("decodes to the same entries, or fails as the original does, for any JSON array of objects", () => {
    const value = fc.oneof(fc.string(), fc.boolean(), fc.integer(), fc.constant(null), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }))
    const key = fc.constantFrom("name", "interface", "ips", "mac", "default", "dns", "device-info", "gateway", "extra")
    const entries = fc.array(fc.dictionary(key, value, { maxKeys: 9 }), { maxLength: 5 })
    fc.assert(
      fc.property(entries, fc.boolean(), (list, indent) => {
        const text = JSON.stringify(list, null, indent ? 2 : undefined)
        const before = decodeNetworkStatus(text)
        const after = decodeNetworkStatus(compactNetworkStatus(text))
        expect(Either.isRight(after)).toBe(Either.isRight(before))
        if (Either.isRight(before) && Either.isRight(after)) {
          const pick = (e: NetworkStatusEntry) => ({ name: e.name, interface: e.interface, ips: e.ips, default: e.default })
          expect(after.right.map(pick)).toStrictEqual(before.right.map(pick))
        }
      }),
      { numRuns: 500 }
    )
  })
})

describe("readNetworkStatus: decodeNetworkStatus's verdict without Schema", () => {
  const agrees = (text: string) => {
    const decoded = decodeNetworkStatus(text)
    const read = readNetworkStatus(text)
    expect(read === undefined, text.slice(0, 200)).toBe(Either.isLeft(decoded))
    if (Either.isRight(decoded) && read !== undefined) {
      const pick = (e: NetworkStatusEntry) => ({ name: e.name, interface: e.interface, ips: e.ips, default: e.default })
      expect(read.map(pick)).toStrictEqual(decoded.right.map(pick))
    }
  }

  it.each([
    ["a default and a secondary entry", JSON.stringify([{ name: "cluster", interface: "eth0", ips: ["10.244.1.5"], default: true }, { name: "ns/net", interface: "net1", ips: ["10.0.0.5/24"] }])],
    ["ips null", JSON.stringify([{ name: "ns/net", ips: null }])],
    ["no ips", JSON.stringify([{ name: "ns/net" }])],
    ["an empty array", "[]"],
    ["not JSON", "{not json"],
    ["an object, not an array", JSON.stringify({ name: "ns/net" })],
    ["an entry without a name", JSON.stringify([{ interface: "net1" }])],
    ["a name that is a number", JSON.stringify([{ name: 5 }])],
    ["an interface that is null", JSON.stringify([{ name: "ns/net", interface: null }])],
    ["a mac that is a number", JSON.stringify([{ name: "ns/net", mac: 5 }])],
    ["default as a string", JSON.stringify([{ name: "ns/net", default: "true" }])],
    ["an address that is a number", JSON.stringify([{ name: "ns/net", ips: ["10.0.0.1", 5] }])],
    ["ips as a string", JSON.stringify([{ name: "ns/net", ips: "10.0.0.1" }])],
    ["an entry that is an array", JSON.stringify([["ns/net"]])],
    ["an entry that is null", JSON.stringify([null])],
    ["dns and device-info of any shape", JSON.stringify([{ name: "ns/net", dns: 5, "device-info": [1] }])],
    ["over the size limit", JSON.stringify([{ name: "ns/net", extra: "x".repeat(MAX_ANNOTATION_BYTES) }])]
  ])("%s", (_name, text) => agrees(text))

  it("agrees with decodeNetworkStatus on any JSON array of small objects", () => {
    const value = fc.oneof(fc.string(), fc.boolean(), fc.integer(), fc.constant(null), fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 3 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }))
    const key = fc.constantFrom("name", "interface", "ips", "mac", "default", "dns", "device-info", "extra")
    const entry = fc.oneof({ weight: 9, arbitrary: fc.dictionary(key, value, { maxKeys: 8 }) }, { weight: 1, arbitrary: value })
    fc.assert(fc.property(fc.array(entry, { maxLength: 4 }), (list) => agrees(JSON.stringify(list))), { numRuns: 1000 })
  })
})
