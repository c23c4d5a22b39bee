/**
 * Multus pod annotations: the `network-status` the runtime wrote and the `networks`
 * selection the pod asked for. Decoded with Schema; malformed input is a typed error.
 */
import { Data, Either, ParseResult, Schema } from "effect"
import { type IPAddress, ipEquals, parseIP } from "./ip.ts"
import { isRecord } from "./json.ts"

export const NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
export const LEGACY_NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/networks-status"
export const NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"

/** Annotations larger than this are refused rather than parsed (the API caps all annotations at 256 KiB). */
export const MAX_ANNOTATION_BYTES = 256 * 1024

export class AnnotationError extends Data.TaggedError("AnnotationError")<{
  readonly annotation: string
  readonly message: string
}> {}

export const NetworkStatusEntry = Schema.Struct({
  name: Schema.String,
  interface: Schema.optional(Schema.String),
  ips: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  mac: Schema.optional(Schema.String),
  default: Schema.optional(Schema.Boolean),
  dns: Schema.optional(Schema.Unknown),
  "device-info": Schema.optional(Schema.Unknown)
})
export type NetworkStatusEntry = typeof NetworkStatusEntry.Type

const NetworkStatusList = Schema.parseJson(Schema.Array(NetworkStatusEntry))

const SelectionElement = Schema.Struct({
  name: Schema.String,
  namespace: Schema.optional(Schema.String),
  interface: Schema.optional(Schema.String),
  ips: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
})
const SelectionList = Schema.parseJson(Schema.Array(SelectionElement))

/** A network the pod is attached to (or asked for): the NAD's namespace and name, and the interface. */
export interface Attachment {
  readonly namespace: string
  readonly name: string
  readonly interface: string | undefined
}

const DECODE_OPTIONS = { errors: "all", onExcessProperty: "ignore" } as const

const decodeWith = <A>(schema: Schema.Schema<A, string>, annotation: string, text: string): Either.Either<A, AnnotationError> => {
  if (text.length > MAX_ANNOTATION_BYTES) {
    return Either.left(new AnnotationError({ annotation, message: `annotation is ${text.length} bytes, over ${MAX_ANNOTATION_BYTES}` }))
  }
  const decoded = Schema.decodeUnknownEither(schema, DECODE_OPTIONS)(text)
  return Either.mapLeft(decoded, (e) => new AnnotationError({ annotation, message: oneLine(e) }))
}

const shorten = (text: string, max = 60): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

/** Where in a decoded value a problem is: `a.b[0].c`. */
export const pathText = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((k) => (typeof k === "number" ? `[${k}]` : `.${String(k)}`)).join("").replace(/^\./, "")

/** A decode failure as one line an operator reads in `kubectl get events`: where, and what was wrong (not Schema's tree). */
export const oneLine = (e: ParseResult.ParseError): string => {
  const [first] = ParseResult.ArrayFormatter.formatErrorSync(e)
  if (first === undefined) return "cannot be decoded"
  if (first._tag === "Transformation" && first.path.length === 0) return `not valid JSON (${first.message})`
  const where = pathText(first.path)
  const m = /^Expected (.*), actual (.*)$/s.exec(first.message)
  const expected = m === null ? undefined : m[1]!.startsWith("ReadonlyArray<") ? "a JSON array" : m[1]!.startsWith("{") ? "a JSON object" : m[1]!
  const what = m === null ? first.message : `expected ${expected}, got ${shorten(m[2]!)}`
  return where === "" ? what : `${where}: ${what}`
}

/** The fields of a `network-status` entry that decide anything here (the rest only pass through `Unknown`). */
const KEPT_STATUS_FIELDS = ["name", "interface", "ips", "default"] as const

/** JSON.parse of an annotation within the size limit; undefined where that fails. */
const parseJson = (text: string): unknown => {
  if (text.length > MAX_ANNOTATION_BYTES) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * A shorter `network-status` that decodes to the same verdict and entries, for the pod cache: keeps
 * name, interface, ips, default, and a MAC that is not a string (still refused). Text that is not a
 * JSON array of objects, or over the size limit, is returned as it is.
 */
export const compactNetworkStatus = (text: string): string => {
  const parsed = parseJson(text)
  if (!Array.isArray(parsed) || !parsed.every(isRecord)) return text
  const compact = parsed.map((e) => {
    const kept: Record<string, unknown> = {}
    for (const field of KEPT_STATUS_FIELDS) if (Object.hasOwn(e, field)) kept[field] = e[field]
    if (Object.hasOwn(e, "mac") && typeof e["mac"] !== "string") kept["mac"] = e["mac"]
    return kept
  })
  const out = JSON.stringify(compact)
  return out.length < text.length ? out : text
}

/** Decodes a `network-status` (or legacy `networks-status`) annotation. */
export const decodeNetworkStatus = (text: string, annotation: string = NETWORK_STATUS_ANNOTATION): Either.Either<ReadonlyArray<NetworkStatusEntry>, AnnotationError> =>
  decodeWith(NetworkStatusList, annotation, text)

const objectName = /^[a-zA-Z0-9._-]+$/

const parseSelectionItem = (item: string, podNamespace: string): Either.Either<Attachment, AnnotationError> => {
  const bad = (why: string) => Either.left(new AnnotationError({ annotation: NETWORKS_ANNOTATION, message: `network "${item}" ${why}` }))
  const slash = item.split("/")
  if (slash.length > 2) return bad("has more than one '/'")
  const [namespace, rest] = slash.length === 2 ? [slash[0]!, slash[1]!] : [podNamespace, slash[0]!]
  const at = rest.split("@")
  if (at.length > 2) return bad("has more than one '@'")
  const [name, iface] = [at[0]!, at[1]]
  if (!objectName.test(namespace) || !objectName.test(name) || (iface !== undefined && !objectName.test(iface))) {
    return bad("is not of the form [namespace/]name[@interface]")
  }
  return Either.right({ namespace, name, interface: iface })
}

/** Decodes the `networks` selection annotation: a comma list `[ns/]name[@if]` or a JSON array. */
export const decodeNetworkSelection = (text: string, podNamespace: string): Either.Either<ReadonlyArray<Attachment>, AnnotationError> => {
  const trimmed = text.trim()
  if (trimmed.startsWith("[")) {
    return Either.map(decodeWith(SelectionList, NETWORKS_ANNOTATION, trimmed), (list) =>
      list.map((e) => ({ namespace: e.namespace || podNamespace, name: e.name, interface: e.interface || undefined }))
    )
  }
  if (trimmed === "") return Either.right([])
  return Either.all(trimmed.split(",").map((item) => parseSelectionItem(item.trim(), podNamespace)))
}

/** The NAD an entry of `network-status` refers to; Multus writes `<namespace>/<name>`. */
export const statusAttachment = (entry: NetworkStatusEntry, podNamespace: string): Attachment => {
  const slash = entry.name.indexOf("/")
  return slash < 0
    ? { namespace: podNamespace, name: entry.name, interface: entry.interface }
    : { namespace: entry.name.slice(0, slash), name: entry.name.slice(slash + 1), interface: entry.interface }
}

/** The address of an `ips` item of `network-status` ("10.0.0.5/24" or "10.0.0.5"). */
export const listedIP = (text: string): IPAddress | undefined => {
  const slash = text.indexOf("/")
  return parseIP(slash < 0 ? text : text.slice(0, slash))
}

/** Whether a `network-status` entry lists `ip`. */
export const listsIP = (entry: NetworkStatusEntry, ip: IPAddress): boolean =>
  (entry.ips ?? []).some((text) => {
    const listed = listedIP(text)
    return listed !== undefined && ipEquals(listed, ip)
  })

const optionalOf = (e: Record<string, unknown>, field: string, type: "string" | "boolean"): boolean => !Object.hasOwn(e, field) || typeof e[field] === type

/**
 * `decodeNetworkStatus`'s verdict without Schema, for paths that read every cached pod: the same
 * entries where it succeeds, undefined where it fails (held to that by test/domain/multus.test.ts).
 */
export const readNetworkStatus = (text: string): ReadonlyArray<NetworkStatusEntry> | undefined => {
  const parsed = parseJson(text)
  if (!Array.isArray(parsed)) return undefined
  for (const r of parsed as Array<unknown>) {
    if (!isRecord(r) || typeof r["name"] !== "string") return undefined
    if (!optionalOf(r, "interface", "string") || !optionalOf(r, "mac", "string") || !optionalOf(r, "default", "boolean")) return undefined
    const ips = r["ips"]
    if (Object.hasOwn(r, "ips") && ips !== null && !(Array.isArray(ips) && ips.every((i) => typeof i === "string"))) return undefined
  }
  return parsed as ReadonlyArray<NetworkStatusEntry>
}
