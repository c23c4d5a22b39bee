/**
 * Decoded whereabouts IPAM configs of NetworkAttachmentDefinitions, memoised per NAD version,
 * with the flat-file defaults whereabouts merges under them. Decoding is pure (domain); this
 * service only adds the file system and the cache.
 */
import { readFileSync } from "node:fs"
import { Context, Effect, type Either, Layer } from "effect"
import { isRecord } from "../domain/json.ts"
import { FLAT_FILE_PATHS, type IpamConfigError, type NadConfigResult, decodeNadConfig } from "../domain/ipam-config.ts"
import type { NadRecord } from "./Caches.ts"
import { ControllerConfig } from "./ControllerConfig.ts"

export interface NadConfigsShape {
  readonly decode: (nad: NadRecord) => Either.Either<NadConfigResult, IpamConfigError>
  /** The flat file's `reconciler_cron_expression`, if a flat file is found. */
  readonly flatFileCron: () => string | undefined
}

export class NadConfigs extends Context.Tag("whereabouts-controller/NadConfigs")<NadConfigs, NadConfigsShape>() {}

type FlatFile = Record<string, unknown> | undefined

/** `read`: one flat file by path, undefined when absent; the first found of `extraPath` and the paths asked for is used. */
const make = (read: (path: string) => FlatFile, extraPath: string | undefined): NadConfigsShape => {
  const memo = new Map<string, { version: string | undefined; result: Either.Either<NadConfigResult, IpamConfigError> }>()
  const reader = (paths: ReadonlyArray<string>) =>
    (extraPath === undefined ? paths : [extraPath, ...paths]).map(read).find((f) => f !== undefined)
  return {
    decode: (nad) => {
      const key = `${nad.namespace}/${nad.name}`
      const hit = memo.get(key)
      if (hit !== undefined && hit.version === nad.resourceVersion && nad.resourceVersion !== undefined) return hit.result
      const result = decodeNadConfig(nad.config, reader)
      if (memo.size > 10_000) memo.clear()
      memo.set(key, { version: nad.resourceVersion, result })
      return result
    },
    flatFileCron: () => {
      const cron = reader(FLAT_FILE_PATHS)?.["reconciler_cron_expression"]
      return typeof cron === "string" && cron !== "" ? cron : undefined
    }
  }
}

/** Reads a flat file once; an unreadable or invalid one is treated as absent. */
const fileReader = () => {
  const cache = new Map<string, FlatFile>()
  const parse = (path: string): FlatFile => {
    try {
      const json: unknown = JSON.parse(readFileSync(path, "utf8"))
      return isRecord(json) ? json : undefined
    } catch {
      return undefined
    }
  }
  return (path: string): FlatFile => {
    if (!cache.has(path)) cache.set(path, parse(path))
    return cache.get(path)
  }
}

/** Flat files from the file system (their absence is normal for this controller). */
export const layer: Layer.Layer<NadConfigs, never, ControllerConfig> = Layer.effect(
  NadConfigs,
  Effect.map(ControllerConfig, (c) => make(fileReader(), c.flatConfigPath))
)

/** Flat files given in memory, by path. */
export const layerMemory = (files: Readonly<Record<string, Record<string, unknown>>> = {}): Layer.Layer<NadConfigs> =>
  Layer.succeed(NadConfigs, make((path) => files[path], undefined))
