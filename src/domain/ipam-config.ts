/**
 * The whereabouts IPAM config carried in a NetworkAttachmentDefinition's `spec.config`,
 * decoded with Schema and normalised the way whereabouts 0.9 does before it names pools.
 */
import { Data, Either, Schema } from "effect"
import { isRecord } from "./json.ts"
import { oneLine } from "./multus.ts"
import { type Cidr, type IPAddress, bitsOf, cidrContains, formatCidr, parseCidr, parseIP, parseIPStrict, toNetworkForm } from "./ip.ts"

export const DEFAULT_RECONCILER_CRON = "30 4 * * *"

/** The key of whereabouts' ConfigMap (`whereabouts-config`) that holds the reconciler's schedule. */
export const SCHEDULE_CONFIGMAP_KEY = "cron-expression"

/** Where whereabouts looks for its flat-file defaults, after the config's own `configuration_path`. */
export const FLAT_FILE_PATHS: ReadonlyArray<string> = [
  "/etc/kubernetes/cni/net.d/whereabouts.d/whereabouts.conf",
  "/etc/cni/net.d/whereabouts.d/whereabouts.conf",
  "/host/etc/cni/net.d/whereabouts.d/whereabouts.conf"
]

export type IpamConfigErrorReason =
  "EmptyConfig" | "BadJson" | "MissingIpam" | "BadSchema" | "MissingRange" | "InvalidRange" | "StartOutsideRange" | "InvalidIP" | "BadExclude"

export class IpamConfigError extends Data.TaggedError("IpamConfigError")<{
  readonly reason: IpamConfigErrorReason
  readonly message: string
}> {}

/** Not whereabouts' to judge, so not bad input: no ipam at all, or the config on the nodes' disks. */
export const notOurs = (e: IpamConfigError): boolean => e.reason === "MissingIpam" || e.reason === "EmptyConfig"

/** One range of a whereabouts config, normalised: `range` is the CIDR text in network form. */
export interface IpRange {
  readonly range: string
  readonly cidr: Cidr
  readonly rangeStart?: IPAddress
  readonly rangeEnd?: IPAddress
  readonly exclude: ReadonlyArray<Cidr>
}

export interface IpamConfig {
  /** `network_name`; "" for the unnamed network. */
  readonly networkName: string
  readonly ranges: ReadonlyArray<IpRange>
  readonly enableOverlappingRanges: boolean
  readonly reconcilerCronExpression: string | undefined
  /** Set when the config asks for node-sliced pools (named per node; not resolved here). */
  readonly nodeSliceSize: string | undefined
  /** The CNI network config's own `name`: a node-slice network's NodeSlicePool is named so when it has no `network_name`. */
  readonly configName: string
}

export type NadConfigResult =
  | { readonly _tag: "Whereabouts"; readonly config: IpamConfig }
  | { readonly _tag: "NotWhereabouts"; readonly ipamType: string }

/** A NAD and its decoded `spec.config`. */
export type DecodedNad = { readonly namespace: string; readonly name: string; readonly config: Either.Either<NadConfigResult, IpamConfigError> }

const RangeEntry = Schema.Struct({
  range: Schema.optional(Schema.String),
  range_start: Schema.optional(Schema.String),
  range_end: Schema.optional(Schema.String),
  exclude: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
})

/** The `ipam` object; unknown keys are ignored as Go's encoding/json does. */
export const IpamSchema = Schema.Struct({
  type: Schema.optional(Schema.String),
  ...RangeEntry.fields,
  ipRanges: Schema.optional(Schema.NullOr(Schema.Array(RangeEntry))),
  network_name: Schema.optional(Schema.String),
  enable_overlapping_ranges: Schema.optional(Schema.Boolean),
  reconciler_cron_expression: Schema.optional(Schema.String),
  configuration_path: Schema.optional(Schema.String),
  node_slice_size: Schema.optional(Schema.String)
})
export type IpamRaw = typeof IpamSchema.Type

const fail = (reason: IpamConfigErrorReason, message: string) => Either.left(new IpamConfigError({ reason, message }))

const isZero = (v: unknown): boolean =>
  v === undefined || v === null || v === "" || v === 0 || v === false || (Array.isArray(v) && v.length === 0)

/** Locates the whereabouts `ipam` object in a single plugin config or a config list. */
export const findIpam = (config: unknown): Either.Either<{ readonly _tag: "Found"; readonly ipam: Record<string, unknown> } | NadConfigResult, IpamConfigError> => {
  if (!isRecord(config)) return fail("BadSchema", "CNI config is not a JSON object")
  const plugins = config["plugins"]
  const candidates = Array.isArray(plugins) ? plugins : [config]
  const ipams = candidates.flatMap((p) => (isRecord(p) && isRecord(p["ipam"]) ? [p["ipam"]] : []))
  const wb = ipams.find((i) => i["type"] === "whereabouts")
  if (wb !== undefined) return Either.right({ _tag: "Found", ipam: wb })
  if (ipams.length === 0) return fail("MissingIpam", "IPAM config missing 'ipam' key")
  return Either.right({ _tag: "NotWhereabouts", ipamType: String(ipams[0]?.["type"] ?? "") })
}

/** An exclude, read strictly as upstream reads it (net.ParseCIDR / net.ParseIP: no leading zeros). */
const parseExclude = (text: string): Cidr | undefined => {
  const slash = text.indexOf("/")
  if (slash >= 0 && parseIPStrict(text.slice(0, slash)) === undefined) return undefined
  const cidr = parseCidr(text)
  if (cidr !== undefined) return toNetworkForm(cidr)
  const ip = parseIPStrict(text)
  return ip === undefined ? undefined : { family: ip.family, address: ip.value, prefix: bitsOf(ip.family) }
}

const normaliseRange = (entry: typeof RangeEntry.Type, lenientBounds: boolean): Either.Either<IpRange, IpamConfigError> => {
  const text = entry.range ?? ""
  const exclude: Array<Cidr> = []
  for (const e of entry.exclude ?? []) {
    const cidr = parseExclude(e)
    if (cidr === undefined) return fail("BadExclude", `invalid CIDR in exclude list: ${e}`)
    exclude.push(cidr)
  }
  const dash = text.indexOf("-")
  if (dash >= 0) {
    // "<start>-<ip>/<prefix>": the start bounds the range, the CIDR's own address becomes its end.
    const start = parseIP(text.slice(0, dash))
    if (start === undefined) return fail("InvalidRange", `invalid range start IP: ${text.slice(0, dash)}`)
    const cidr = parseCidr(text.slice(dash + 1))
    if (cidr === undefined) return fail("InvalidRange", `invalid CIDR '${text.slice(dash + 1)}' in range ${text}`)
    const net = toNetworkForm(cidr)
    if (!cidrContains(net, start)) return fail("StartOutsideRange", `invalid range start for CIDR ${formatCidr(net)}: ${text.slice(0, dash)}`)
    return Either.right({ range: formatCidr(net), cidr: net, rangeStart: start, rangeEnd: { family: cidr.family, value: cidr.address }, exclude })
  }
  const cidr = parseCidr(text)
  if (cidr === undefined) return fail("InvalidRange", `invalid CIDR ${JSON.stringify(text)}`)
  const net = toNetworkForm(cidr)
  // Top-level bounds are read leniently (leading zeros as decimal, garbage dropped); an
  // ipRanges entry's bounds strictly, and a bad one fails the whole config, as upstream does.
  const bound = (name: string, value: string | undefined): Either.Either<IPAddress | undefined, IpamConfigError> => {
    if (value === undefined || value === "") return Either.right(undefined)
    const ip = lenientBounds ? parseIP(value) : parseIPStrict(value)
    if (ip !== undefined || lenientBounds) return Either.right(ip)
    return fail("InvalidIP", `invalid ${name} IP address: ${value}`)
  }
  return Either.gen(function* () {
    const rangeStart = yield* bound("range_start", entry.range_start)
    const rangeEnd = yield* bound("range_end", entry.range_end)
    return { range: formatCidr(net), cidr: net, ...(rangeStart === undefined ? {} : { rangeStart }), ...(rangeEnd === undefined ? {} : { rangeEnd }), exclude }
  })
}

/** Normalises a decoded `ipam` object into pool-ready ranges. */
export const normaliseIpam = (raw: IpamRaw, configName = ""): Either.Either<IpamConfig, IpamConfigError> =>
  Either.gen(function* () {
    const ranges: Array<IpRange> = []
    if (raw.range !== undefined && raw.range !== "") ranges.push(yield* normaliseRange(raw, true))
    for (const entry of raw.ipRanges ?? []) ranges.push(yield* normaliseRange(entry, false))
    if (ranges.length === 0) return yield* fail("MissingRange", "no 'range' or 'ipRanges' in whereabouts IPAM config")
    return {
      networkName: raw.network_name ?? "",
      ranges,
      enableOverlappingRanges: raw.enable_overlapping_ranges ?? true,
      reconcilerCronExpression: raw.reconciler_cron_expression || undefined,
      nodeSliceSize: raw.node_slice_size || undefined,
      configName
    }
  })

const decodeIpamRaw = Schema.decodeUnknownEither(IpamSchema, { errors: "all", onExcessProperty: "ignore" })

/** Decodes a NAD's `spec.config`; `readFlatFile` answers the parsed flat file at the first existing path, if any. */
export const decodeNadConfig = (
  specConfig: string | undefined,
  readFlatFile: (paths: ReadonlyArray<string>) => Record<string, unknown> | undefined = () => undefined
): Either.Either<NadConfigResult, IpamConfigError> =>
  Either.gen(function* () {
    if (specConfig === undefined || specConfig.trim() === "") return yield* fail("EmptyConfig", "spec.config is empty: the CNI config lives on the nodes' disks")
    let json: unknown
    try {
      json = JSON.parse(specConfig)
    } catch (e) {
      return yield* fail("BadJson", `spec.config is not valid JSON: ${(e as Error).message}`)
    }
    const found = yield* findIpam(json)
    if (found._tag !== "Found") return found
    // Flat-file values fill only what the NAD leaves empty; the NAD always decides `enable_overlapping_ranges`.
    const own = found.ipam["configuration_path"]
    const flat = readFlatFile(typeof own === "string" && own !== "" ? [own, ...FLAT_FILE_PATHS] : FLAT_FILE_PATHS)
    const merged = { ...found.ipam }
    for (const [key, value] of Object.entries(flat ?? {})) {
      if (key !== "enable_overlapping_ranges" && isZero(merged[key])) merged[key] = value
    }
    const raw = yield* Either.mapLeft(decodeIpamRaw(merged), (e) => new IpamConfigError({ reason: "BadSchema", message: `ipam.${oneLine(e)}` }))
    const name = (json as Record<string, unknown>)["name"]
    const config = yield* normaliseIpam(raw, typeof name === "string" ? name : "")
    return { _tag: "Whereabouts", config } as const
  })
