/**
 * The in-memory environment with a hook around every KubeApi call, for tests that must act
 * *between* two calls of the code under test (hold a write in flight, re-create a pod between a
 * list and a free, let a scheduler pick the order of calls).
 */
import { Context, Deferred, Effect, Layer } from "effect"
import { withKubeApi } from "../../src/programs/layers.ts"
import type { memory } from "../../src/testing/layers.ts"
import * as PluginStore from "../../src/testing/PluginStore.ts"
import * as ControllerConfig from "../../src/services/ControllerConfig.ts"
import { InMemoryCluster, type MemoryClusterOptions, makeMemoryKubeApi } from "../../src/testing/InMemoryCluster.ts"
import { KubeApi, type KubeApiShape, around } from "../../src/services/KubeApi.ts"
import type { KubeError } from "../../src/services/KubeError.ts"
import * as NadConfigs from "../../src/services/NadConfigs.ts"

export interface ApiCallInfo {
  readonly verb: "get" | "list" | "create" | "replace" | "patch" | "delete"
  readonly resource: string
  readonly namespace: string | undefined
  readonly name: string | undefined
}

/** Runs before (or after) a call; whatever it does happens between the caller's calls. */
export type Hook = (call: ApiCallInfo) => Effect.Effect<void>

/** Mutable on purpose: a test installs, replaces and removes hooks while the world runs. */
export class HookSlots {
  before: Hook | undefined = undefined
  after: Hook | undefined = undefined
  clear(): void {
    this.before = undefined
    this.after = undefined
  }
}

export class ApiHooks extends Context.Tag("test/ApiHooks")<ApiHooks, HookSlots>() {}

const run = (hook: Hook | undefined, call: ApiCallInfo): Effect.Effect<void> => (hook === undefined ? Effect.void : hook(call))

/** `api` with the hooks around every call but `watch` (informers stay unhooked). */
export const hooked = (api: KubeApiShape, slots: HookSlots): KubeApiShape => {
  const wrap = <A>(call: ApiCallInfo, effect: Effect.Effect<A, KubeError>): Effect.Effect<A, KubeError> =>
    Effect.suspend(() => run(slots.before, call)).pipe(
      Effect.zipRight(effect),
      Effect.tap(() => Effect.suspend(() => run(slots.after, call)))
    )
  return around(api, (info, effect) => wrap({ ...info, resource: info.resource.plural }, effect))
}

const hookedMemoryKubeApi: Layer.Layer<KubeApi, never, InMemoryCluster | ApiHooks> = Layer.effect(
  KubeApi,
  Effect.zipWith(InMemoryCluster, ApiHooks, (state, slots) => hooked(makeMemoryKubeApi(state), slots))
)

/** Like `memory(...)`, plus `ApiHooks` to act between the calls of the code under test. */
export const memoryWithHooks = (
  config: Partial<ControllerConfig.ControllerConfigShape> = {},
  options: { readonly cluster?: MemoryClusterOptions } = {}
) =>
  PluginStore.layer.pipe(
    Layer.provideMerge(withKubeApi(hookedMemoryKubeApi)),
    Layer.provideMerge(Layer.mergeAll(ControllerConfig.layerWith(config), NadConfigs.layerMemory())),
    Layer.provideMerge(InMemoryCluster.layer(options.cluster)),
    Layer.provideMerge(Layer.sync(ApiHooks, () => new HookSlots()))
  )

/** A hook that fires `action` once, on the first call matching `match`, then uninstalls itself. */
export const once = (match: (call: ApiCallInfo) => boolean, action: (call: ApiCallInfo) => Effect.Effect<void>) => {
  let fired = false
  return (call: ApiCallInfo): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (fired || !match(call)) return Effect.void
      fired = true
      return action(call)
    })
}

export type MemoryEnv = Layer.Layer.Success<ReturnType<typeof memory>>

/**
 * Holds the first call matching `match` until `open` runs: install `hook` (alone, or composed
 * with others), then `entered` completes once that call is held.
 */
export const gateOnce = (match: (call: ApiCallInfo) => boolean) =>
  Effect.map(Effect.all([Deferred.make<void>(), Deferred.make<void>()]), ([entered, gate]) => ({
    hook: once(match, () => Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate))),
    entered: Deferred.await(entered),
    open: Deferred.succeed(gate, undefined)
  }))
