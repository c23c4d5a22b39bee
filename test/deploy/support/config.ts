/**
 * The Config keys the controller reads, learnt by running its Config definition over a rendered
 * container's environment (the downward API resolved as the kubelet would).
 */
import { ConfigProvider, Effect, Either } from "effect"
import { config } from "../../../src/services/ControllerConfig.ts"
import type { Obj } from "./tools.ts"

/** Runs `config` over exactly `env`, recording every key it looks up. */
export const loadConfig = (env: ReadonlyMap<string, string>) => {
  const read = new Set<string>()
  const inner = ConfigProvider.fromMap(new Map(env)).flattened
  const recording = ConfigProvider.fromFlat(
    ConfigProvider.makeFlat({
      load: (path, primitive, split) => {
        read.add(path.join("."))
        return inner.load(path, primitive, split)
      },
      enumerateChildren: (path) => inner.enumerateChildren(path),
      patch: inner.patch
    })
  )
  const result = Effect.runSync(Effect.either(Effect.withConfigProvider(config, recording)))
  return { read, result }
}

/** The decoded configuration, or a failure with Config's message. */
export const decodeConfig = (env: ReadonlyMap<string, string>) => {
  const { result } = loadConfig(env)
  if (Either.isLeft(result)) throw new Error(`the environment does not decode: ${String(result.left)}`)
  return result.right
}

/** The container's environment as the kubelet would fill it in (downward API resolved). */
export const resolveEnv = (pod: Obj, container: Obj, podName: string): Map<string, string> => {
  const fields: Record<string, string> = { "metadata.name": podName, "metadata.namespace": pod["metadata"]["namespace"] }
  const env = new Map<string, string>()
  for (const e of container["env"] ?? []) {
    if (typeof e["value"] === "string") env.set(e["name"], e["value"])
    else {
      const path = e["valueFrom"]?.["fieldRef"]?.["fieldPath"]
      const value = typeof path === "string" ? fields[path] : undefined
      if (value === undefined) throw new Error(`env ${e["name"]}: only literal values and metadata.name/namespace fieldRefs are modelled here`)
      env.set(e["name"], value)
    }
  }
  return env
}
