/**
 * What an informer says when it restarts: a list that got no answer (the server cannot be reached,
 * which the live KubeApi reports once for everyone) only at debug; one the server refused (a 403
 * naming the resource) as the warning it always was.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Logger, LogLevel, Option, Stream, TestClock } from "effect"
import { makeInformer } from "../../src/services/Informer.ts"
import { KubeApi, type KubeApiShape, type KubeObject } from "../../src/services/KubeApi.ts"
import { KubeError } from "../../src/services/KubeError.ts"
import { Pods } from "../../src/services/resources.ts"

/** A KubeApi that answers lists with `list`; its watches stay open, and nothing else is used. */
const listsOnly = (list: KubeApiShape["list"]): KubeApiShape => {
  const unused = () => Effect.die("not used")
  return { list, watch: () => Stream.never, get: unused, create: unused, replace: unused, patch: unused, delete: unused }
}

/** A KubeApi whose lists fail with these errors in turn, then answer an empty list; its watches stay open. */
const failingLists = (errors: ReadonlyArray<KubeError>): KubeApiShape => {
  let calls = 0
  return listsOnly(() => {
    const e = errors[calls++]
    return e === undefined ? Effect.succeed({ items: [], resourceVersion: "1", continue: undefined }) : Effect.fail(e)
  })
}

describe("informer restarts", () => {
  it.scoped("no answer from the server: each restart at debug; a 403: a warning naming the resource", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      // Its own lines (effect's runtime adds debug lines of its own about the list's page fibers).
      const logger = Logger.make(({ logLevel, message, annotations }) => {
        if (String(message).startsWith("informer for")) lines.push(`${logLevel.label} ${String(message)} ${String(HashMap.get(annotations, "error").pipe((o) => (o._tag === "Some" ? o.value : "")))}`)
      })
      const refused = new KubeError({ reason: "Unavailable", verb: "list", target: "pods", detail: "ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443" })
      const timedOut = new KubeError({ reason: "Timeout", verb: "list", target: "pods", detail: "no answer within 30s" })
      const forbidden = new KubeError({ reason: "Forbidden", verb: "list", target: "pods", status: 403, detail: 'pods is forbidden: User "x" cannot list resource "pods"' })
      const busy = new KubeError({ reason: "Unavailable", verb: "list", target: "pods", status: 503, detail: "the server is currently unable to handle the request" })
      const informer = yield* makeInformer({
        resource: Pods,
        transform: (o: KubeObject) => o.metadata.name,
        keyOf: (name) => name,
        versionOf: () => undefined
      }).pipe(Effect.provideService(KubeApi, failingLists([refused, refused, timedOut, forbidden, busy])), Effect.provide(Logger.add(logger)), Logger.withMinimumLogLevel(LogLevel.Debug))
      // Five restarts of the jittered 1 s → 30 s backoff: at most 1.2 × (1 + 2 + 4 + 8 + 16) s.
      yield* TestClock.adjust("40 seconds")
      yield* informer.awaitSynced
      expect(lines).toEqual([
        `DEBUG informer for pods failed, restarting ${refused.message}`,
        `DEBUG informer for pods failed, restarting ${refused.message}`,
        `DEBUG informer for pods failed, restarting ${timedOut.message}`,
        `WARN informer for pods failed, restarting ${forbidden.message}`,
        `WARN informer for pods failed, restarting ${busy.message}`
      ])
      expect(informer.restarts()).toBe(5)
    }))
})

describe("informer lists", () => {
  it.scoped("go into the cache page by page: a list never holds a second copy of the cache, and a list started again sees every object again", () =>
    Effect.gen(function* () {
      const cached: { current?: { readonly get: (key: string) => Option.Option<string> } } = {}
      const atPage2: Array<boolean> = []
      let lists = 0
      const api = listsOnly((_r, _ns, options = {}) => {
        lists++
        if (options.continue === undefined) return Effect.succeed({ items: [pod("a"), pod("b")], resourceVersion: "7", continue: "2" })
        atPage2.push(Option.isSome(cached.current!.get("a")))
        // The first time, the continue token has expired: the list starts again.
        if (lists === 2) return Effect.fail(new KubeError({ reason: "Gone", verb: "list", target: "pods", status: 410, detail: "continue token expired" }))
        return Effect.succeed({ items: [pod("c")], resourceVersion: "7", continue: undefined })
      })
      const informer = yield* makeInformer({ resource: Pods, transform: (o: KubeObject) => o.metadata.name, keyOf: (name) => name, versionOf: () => undefined, pageSize: 2 }).pipe(
        Effect.provideService(KubeApi, api)
      )
      cached.current = informer
      yield* informer.awaitSynced
      expect(atPage2).toEqual([true, true])
      expect([...informer.values()].sort()).toEqual(["a", "b", "c"])
    }))
})

describe("informer relists after 410", () => {
  it.scoped("on a growing backoff, as client-go's reflector does: a watch too old again at once is not a loop of full lists, nor a restart", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (String(message).includes("pods")) lines.push(`${logLevel.label} ${String(message)}`)
      })
      let lists = 0
      const api: KubeApiShape = {
        ...listsOnly(() => Effect.sync(() => ({ items: [pod(`p${lists++}`)], resourceVersion: "7", continue: undefined }))),
        watch: () => Stream.fail(new KubeError({ reason: "Gone", verb: "watch", target: "pods", status: 410, detail: "too old resource version" }))
      }
      const informer = yield* makeInformer({ resource: Pods, transform: (o: KubeObject) => o.metadata.name, keyOf: (name) => name, versionOf: () => undefined }).pipe(
        Effect.provideService(KubeApi, api),
        Effect.provide(Logger.add(logger)),
        Logger.withMinimumLogLevel(LogLevel.Debug)
      )
      yield* informer.awaitSynced
      // Relists after 1, 2 and 4 s (each jittered by at most a fifth): at 10 s, the fourth list; the fifth is due after 12 s at the earliest.
      yield* TestClock.adjust("10 seconds")
      expect(lists).toBe(4)
      expect(informer.restarts()).toBe(0)
      expect(lines.filter((l) => l.includes("too old"))).toEqual(Array(4).fill("DEBUG pods: version too old to resume (410), listing again"))
      // Each relist still reports what the gap hid: only the last list's pod is left.
      expect(informer.values()).toEqual(["p3"])
    }))
})

describe("informer sync", () => {
  it.scoped("is logged once per informer, naming the resource, the objects it holds and how long it took; a relist says nothing", () =>
    Effect.gen(function* () {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message, annotations }) => {
        const a = (k: string) => String(Option.getOrElse(HashMap.get(annotations, k), () => "-"))
        if (String(message).includes("synced")) lines.push(`${logLevel.label} ${String(message)} ${a("resource")} ${a("objects")} ${a("seconds")}`)
      })
      let lists = 0
      // The first list takes 2.5 s; every later one (after a 410) answers at once.
      const api: KubeApiShape = {
        ...listsOnly(() => Effect.succeed({ items: [pod("a"), pod("b")], resourceVersion: "7", continue: undefined }).pipe(Effect.delay(lists++ === 0 ? "2500 millis" : "0 millis"))),
        // The first watch is too old (a relist); the next stays open.
        watch: () => (lists === 1 ? Stream.fail(new KubeError({ reason: "Gone", verb: "watch", target: "pods", status: 410, detail: "too old" })) : Stream.never)
      }
      const informer = yield* makeInformer({ resource: Pods, transform: (o: KubeObject) => o.metadata.name, keyOf: (name) => name, versionOf: () => undefined }).pipe(
        Effect.provideService(KubeApi, api),
        Effect.provide(Logger.add(logger))
      )
      // The relist waits its turn on the backoff: 1 s, jittered by at most a fifth.
      yield* TestClock.adjust("4 seconds")
      yield* informer.awaitSynced
      yield* Effect.yieldNow()
      expect(lists).toBe(2)
      expect(lines).toEqual(["INFO pods cache synced pods 2 2.5"])
    }))
})

const pod = (name: string): KubeObject => ({ apiVersion: "v1", kind: "Pod", metadata: { namespace: "default", name, uid: `uid-${name}`, resourceVersion: "1" } })
