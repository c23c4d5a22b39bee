/**
 * A NAD's config as the whereabouts 0.9 plugin takes it, for the CNI simulation. The plugin loads
 * a config whose excludes do not parse (it parses them only when it looks for a free address), so
 * such a config is read here with the excludes that parse, and each range keeps the first one that
 * does not: an ADD needing a new address there fails after the range's pool was read (created),
 * a re-ADD of an address the pod holds and every DEL go on. What parses is the domain's decoder's
 * call, so the simulation and the controller never disagree on it.
 */
import { Either } from "effect"
import { type IpRange, type IpamConfig, type IpamConfigError, decodeNadConfig, findIpam, normaliseIpam } from "../domain/ipam-config.ts"
import { isRecord } from "../domain/json.ts"

export interface PluginRange {
  readonly range: IpRange
  /** The first exclude of the range that does not parse, if any. */
  readonly badExclude: string | undefined
}

export interface PluginConfig extends Omit<IpamConfig, "ranges"> {
  readonly ranges: ReadonlyArray<PluginRange>
}

export type PluginConfigResult = { readonly _tag: "Whereabouts"; readonly config: PluginConfig } | { readonly _tag: "NotWhereabouts" }

const parses = (exclude: string): boolean => Either.isRight(normaliseIpam({ range: "0.0.0.0/0", exclude: [exclude] }))

/** Splits an entry's excludes in place into those that parse (left on it) and the first that does not (returned). */
const takeBadExclude = (entry: Record<string, unknown>): string | undefined => {
  const list = entry["exclude"]
  if (!Array.isArray(list) || !list.every((e) => typeof e === "string")) return undefined
  const bad = list.find((e) => !parses(e))
  entry["exclude"] = list.filter(parses)
  return bad
}

/** The plugin's reading of `spec.config`: the domain's decoding, except that excludes that do not parse stay with their range. */
export const decodePluginConfig = (text: string): Either.Either<PluginConfigResult, IpamConfigError> => {
  const decoded = decodeNadConfig(text)
  const plain = (config: IpamConfig, bad: ReadonlyArray<string | undefined> = []): PluginConfigResult => ({
    _tag: "Whereabouts",
    config: { ...config, ranges: config.ranges.map((range, i) => ({ range, badExclude: bad[i] })) }
  })
  if (Either.isRight(decoded)) return Either.right(decoded.right._tag === "Whereabouts" ? plain(decoded.right.config) : { _tag: "NotWhereabouts" })
  if (decoded.left.reason !== "BadExclude") return Either.left(decoded.left)
  // It got as far as the ranges, so the JSON parses and holds a whereabouts ipam object.
  const json: unknown = JSON.parse(text)
  const found = findIpam(json)
  if (Either.isLeft(found) || found.right._tag !== "Found") return Either.left(decoded.left)
  const ipam = found.right.ipam
  // Ranges in the decoder's order: the top-level one (when set), then ipRanges.
  const bad: Array<string | undefined> = []
  if (typeof ipam["range"] === "string" && ipam["range"] !== "") bad.push(takeBadExclude(ipam))
  if (Array.isArray(ipam["ipRanges"])) for (const entry of ipam["ipRanges"]) bad.push(isRecord(entry) ? takeBadExclude(entry) : undefined)
  const again = decodeNadConfig(JSON.stringify(json))
  if (Either.isLeft(again) || again.right._tag !== "Whereabouts") return Either.left(decoded.left)
  return Either.right(plain(again.right.config, bad))
}
