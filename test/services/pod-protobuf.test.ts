/** The protobuf pod-list reader on bytes made here: the fields it keeps, the ones it skips, and refusals. */
import { describe, expect, it } from "vitest"
import { ProtobufError, decodePodList, statusMessage } from "../../src/services/live/pod-protobuf.ts"

// A minimal protobuf writer: varints, and length-delimited fields.
const varint = (n: number): Array<number> => {
  const out: Array<number> = []
  while (n >= 128) {
    out.push((n % 128) | 128)
    n = Math.floor(n / 128)
  }
  return [...out, n]
}
const field = (no: number, value: string | Buffer | ReadonlyArray<number>): Buffer => {
  const bytes = typeof value === "string" ? Buffer.from(value, "utf8") : Buffer.from(value)
  return Buffer.from([...varint(no * 8 + 2), ...varint(bytes.length), ...bytes])
}
const num = (no: number, n: number): Buffer => Buffer.from([...varint(no * 8), ...varint(n)])
const msg = (...parts: ReadonlyArray<Buffer>) => Buffer.concat(parts)
const envelope = (object: Buffer, encoding = "") => Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0x00]), msg(field(1, msg(field(1, "v1"), field(2, "PodList"))), field(2, object), ...(encoding === "" ? [] : [field(3, encoding)]))])

const pod = msg(
  field(1, msg(field(1, "web-0"), field(3, "shop"), field(5, "u-1"), field(6, "42"), num(7, 3), field(9, msg(num(1, 1_764_000_000), num(2, 5))),
    field(12, msg(field(1, "k8s.v1.cni.cncf.io/network-status"), field(2, '[{"name":"shop/net1","ips":["10.0.0.5"]}]'))),
    field(12, msg(field(1, "other/annotation"), field(2, "x"))),
    field(17, msg(field(1, "kubelet"))))),
  field(2, msg(field(2, msg(field(1, "app"))), field(3, "Always"), field(10, "node-1"))),
  field(3, msg(field(1, "Failed"), field(4, "Evicted"), field(2, msg(field(1, "DisruptionTarget"), field(2, "True"), field(5, "EvictionByEvictionAPI"), field(6, "msg")))))
)

describe("decodePodList", () => {
  it("keeps what projectPod reads, skips the rest, and reads the list's version and continue token", () => {
    const page = decodePodList(envelope(msg(field(1, msg(field(2, "777"), field(3, "next"), num(4, 9))), field(2, pod), field(2, msg(field(1, msg(field(1, "bare"))))))))
    expect(page.resourceVersion).toBe("777")
    expect(page.continue).toBe("next")
    expect(page.items).toEqual([
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "web-0", namespace: "shop", uid: "u-1", resourceVersion: "42", deletionTimestamp: "2025-11-24T16:00:00Z", annotations: { "k8s.v1.cni.cncf.io/network-status": '[{"name":"shop/net1","ips":["10.0.0.5"]}]' } },
        spec: { nodeName: "node-1" },
        status: { phase: "Failed", reason: "Evicted", conditions: [{ type: "DisruptionTarget", status: "True", reason: "EvictionByEvictionAPI" }] }
      },
      { apiVersion: "v1", kind: "Pod", metadata: { name: "bare" }, spec: {}, status: {} }
    ])
  })

  it("the last page has no continue token", () => {
    expect(decodePodList(envelope(msg(field(1, msg(field(2, "1"), field(3, "")))))).continue).toBeUndefined()
  })

  it("refuses what it cannot read instead of guessing", () => {
    expect(() => decodePodList(Buffer.from("{}"))).toThrow(ProtobufError)
    expect(() => decodePodList(envelope(msg(field(2, pod)), "gzip"))).toThrow("content encoding gzip")
    const whole = envelope(msg(field(2, pod)))
    expect(() => decodePodList(whole.subarray(0, whole.length - 3))).toThrow(ProtobufError)
    expect(() => decodePodList(Buffer.concat([whole, Buffer.from([0x0f])]))).toThrow(ProtobufError)
  })
})

describe("statusMessage", () => {
  it("reads a Status' message; undefined for what is not one", () => {
    expect(statusMessage(envelope(msg(field(2, "Failure"), field(3, "pods is forbidden"), num(6, 403))))).toBe("pods is forbidden")
    expect(statusMessage(Buffer.from("not protobuf"))).toBeUndefined()
  })
})
