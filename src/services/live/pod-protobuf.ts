/**
 * A page of pods in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), read for
 * the fields `projectPod` takes and nothing else: the API server encodes protobuf for a fraction of
 * JSON's cost, and the client skips what it does not read instead of parsing it. Field numbers are
 * k8s.io/api core/v1 and apimachinery meta/v1 generated.proto's (stable: protobuf fields are never
 * renumbered). Every other field is skipped by its wire type.
 */
import type { KubeObject } from "../KubeApi.ts"

/** The annotations projectPod reads (multus.ts); the rest are skipped. */
const KEPT_ANNOTATIONS = new Set(["k8s.v1.cni.cncf.io/network-status", "k8s.v1.cni.cncf.io/networks-status", "k8s.v1.cni.cncf.io/networks"])

export class ProtobufError extends Error {}

/** A cursor over one message's bytes. */
class Reader {
  pos: number
  readonly buf: Buffer
  readonly end: number
  constructor(buf: Buffer, start: number, end: number) {
    this.buf = buf
    this.pos = start
    this.end = end
  }
  varint(): number {
    let result = 0
    let scale = 1
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtobufError("truncated varint")
      const b = this.buf[this.pos++]!
      result += (b & 0x7f) * scale
      if (b < 0x80) return result
      scale *= 128
    }
    throw new ProtobufError("varint too long")
  }
  /** A length-delimited field's [start, end). */
  span(): readonly [number, number] {
    const len = this.varint()
    const start = this.pos
    if (start + len > this.end) throw new ProtobufError("truncated field")
    this.pos = start + len
    return [start, start + len]
  }
  string(): string {
    const [s, e] = this.span()
    return this.buf.toString("utf8", s, e)
  }
  skip(wire: number): void {
    if (wire === 0) this.varint()
    else if (wire === 2) this.span()
    else if (wire === 1) this.pos += 8
    else if (wire === 5) this.pos += 4
    else throw new ProtobufError(`unexpected wire type ${wire}`)
    if (this.pos > this.end) throw new ProtobufError("truncated field")
  }
  /** Calls `f` with each field's number and wire type; `f` reads the value or answers false to skip it. */
  each(f: (field: number, wire: number) => boolean): void {
    while (this.pos < this.end) {
      const tag = this.varint()
      const wire = tag & 7
      if (!f(Math.floor(tag / 8), wire)) this.skip(wire)
    }
  }
  sub(): Reader {
    const [s, e] = this.span()
    return new Reader(this.buf, s, e)
  }
}

/** metav1.Time as its JSON form (RFC 3339, whole seconds, UTC). */
const timeOf = (r: Reader): string => {
  let seconds = 0
  r.each((f, w) => (f === 1 && w === 0 ? ((seconds = r.varint()), true) : false))
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z")
}

const metadataOf = (r: Reader): Record<string, unknown> => {
  const m: Record<string, unknown> = {}
  let annotations: Record<string, string> | undefined
  r.each((f, w) => {
    if (w !== 2) return false
    if (f === 1) m["name"] = r.string()
    else if (f === 3) m["namespace"] = r.string()
    else if (f === 5) m["uid"] = r.string()
    else if (f === 6) m["resourceVersion"] = r.string()
    else if (f === 9) m["deletionTimestamp"] = timeOf(r.sub())
    else if (f === 12) {
      const entry = r.sub()
      let key = ""
      let value = ""
      entry.each((ef, ew) => (ew !== 2 ? false : ef === 1 ? ((key = entry.string()), true) : ef === 2 ? ((value = entry.string()), true) : false))
      if (KEPT_ANNOTATIONS.has(key)) (annotations ??= {})[key] = value
    } else return false
    return true
  })
  if (annotations !== undefined) m["annotations"] = annotations
  return m
}

const specOf = (r: Reader): Record<string, unknown> => {
  const spec: Record<string, unknown> = {}
  r.each((f, w) => (f === 10 && w === 2 ? ((spec["nodeName"] = r.string()), true) : false))
  return spec
}

const conditionOf = (r: Reader): Record<string, string> => {
  const c: Record<string, string> = {}
  r.each((f, w) => {
    if (w !== 2) return false
    if (f === 1) c["type"] = r.string()
    else if (f === 2) c["status"] = r.string()
    else if (f === 5) c["reason"] = r.string()
    else return false
    return true
  })
  return c
}

const statusOf = (r: Reader): Record<string, unknown> => {
  const status: Record<string, unknown> = {}
  const conditions: Array<Record<string, string>> = []
  r.each((f, w) => {
    if (w !== 2) return false
    if (f === 1) status["phase"] = r.string()
    else if (f === 4) status["reason"] = r.string()
    else if (f === 2) conditions.push(conditionOf(r.sub()))
    else return false
    return true
  })
  if (conditions.length > 0) status["conditions"] = conditions
  return status
}

const podOf = (r: Reader): KubeObject => {
  let metadata: Record<string, unknown> = {}
  let spec: Record<string, unknown> = {}
  let status: Record<string, unknown> = {}
  r.each((f, w) => {
    if (w !== 2) return false
    if (f === 1) metadata = metadataOf(r.sub())
    else if (f === 2) spec = specOf(r.sub())
    else if (f === 3) status = statusOf(r.sub())
    else return false
    return true
  })
  return { apiVersion: "v1", kind: "Pod", metadata: metadata as KubeObject["metadata"], spec, status }
}

const MAGIC = [0x6b, 0x38, 0x73, 0x00]

/** Kubernetes' protobuf media type. */
export const PROTOBUF = "application/vnd.kubernetes.protobuf"

/** The object inside the envelope (magic, then runtime.Unknown): a reader over its bytes. */
const unwrap = (buf: Buffer): Reader => {
  if (buf.length < 4 || MAGIC.some((b, i) => buf[i] !== b)) throw new ProtobufError("not a Kubernetes protobuf answer")
  const envelope = new Reader(buf, 4, buf.length)
  let raw: Reader | undefined
  let encoding = ""
  envelope.each((f, w) => {
    if (w !== 2) return false
    if (f === 2) raw = envelope.sub()
    else if (f === 3) encoding = envelope.string()
    else return false
    return true
  })
  if (raw === undefined) throw new ProtobufError("no object in the answer")
  if (encoding !== "") throw new ProtobufError(`content encoding ${encoding}`)
  return raw
}

/** A protobuf Status' message (meta/v1 Status, field 3); undefined when the bytes are not one. */
export const statusMessage = (buf: Buffer): string | undefined => {
  try {
    const status = unwrap(buf)
    let message: string | undefined
    status.each((f, w) => (f === 3 && w === 2 ? ((message = status.string()), true) : false))
    return message
  } catch {
    return undefined
  }
}

/** A PodList page: its pods (the fields projectPod reads), resourceVersion and continue token. */
export const decodePodList = (buf: Buffer): { readonly items: ReadonlyArray<KubeObject>; readonly resourceVersion: string; readonly continue: string | undefined } => {
  const list = unwrap(buf)
  const items: Array<KubeObject> = []
  let resourceVersion = ""
  let token: string | undefined
  list.each((f, w) => {
    if (w !== 2) return false
    if (f === 1) {
      const meta = list.sub()
      meta.each((mf, mw) => (mw !== 2 ? false : mf === 2 ? ((resourceVersion = meta.string()), true) : mf === 3 ? ((token = meta.string()), true) : false))
    } else if (f === 2) items.push(podOf(list.sub()))
    else return false
    return true
  })
  return { items, resourceVersion, continue: token === "" ? undefined : token }
}
