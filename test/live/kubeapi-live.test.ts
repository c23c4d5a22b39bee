/** layerLive against the real API server: what only a real server shows (limiter timing, 401, 410, restarts). */
import * as diagnostics from "node:diagnostics_channel"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as tls from "node:tls"
import { expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Either, Fiber, HashMap, Logger, LogLevel, Schedule, Stream } from "effect"
import { KubeApi } from "../../src/services/KubeApi.ts"
import type { KubeError } from "../../src/services/KubeError.ts"
import * as R from "../../src/services/resources.ts"
import { namespaceObject, poolObject } from "../support/objects.ts"
import { describeLive, liveKubeApi, runningEnvtest, startApiServer, stopApiServer, uniqueNamespace } from "../support/live.ts"

/** What `read` makes of every message on an undici diagnostics channel while the scope lasts, in order. */
const onChannel = <A>(channel: string, read: (message: unknown) => A) =>
  Effect.gen(function* () {
    const seen: Array<A> = []
    const onMessage = (message: unknown) => void seen.push(read(message))
    yield* Effect.acquireRelease(
      Effect.sync(() => diagnostics.subscribe(channel, onMessage)),
      () => Effect.sync(() => diagnostics.unsubscribe(channel, onMessage))
    )
    return seen
  })

/**
 * A watch of a CRD's objects, started over while the API server answers 429 "storage is
 * (re)initializing": the CRD's watch cache is rebuilt when the CRD is (re)established, by another
 * test file on the shared server, and the server asks clients to try again.
 */
const whenStorageReady = <A>(watch: Stream.Stream<A, KubeError>) =>
  Stream.retry(watch, Schedule.spaced("200 millis").pipe(Schedule.intersect(Schedule.recurs(25)), Schedule.whileInput((e: KubeError) => e.reason === "TooManyRequests")))

/** The ALPN protocol of every connection undici opens while the scope lasts, in order. */
const connectedProtocols = onChannel("undici:client:connected", (message): string | false | null => (message as { readonly socket: tls.TLSSocket }).socket.alpnProtocol)

/** The Content-Encoding of every answer undici receives while the scope lasts. */
const answerEncodings = onChannel("undici:request:headers", (message) => {
  const headers = (message as { readonly response: { readonly headers: ReadonlyArray<Buffer> } }).response.headers
  let encoding = "identity"
  for (let i = 0; i + 1 < headers.length; i += 2) if (headers[i]!.toString().toLowerCase() === "content-encoding") encoding = headers[i + 1]!.toString()
  return encoding
})

describeLive("KubeApiLive on a real API server", () => {
  const ns = uniqueNamespace("kubeapi-live")
  const setup = Effect.gen(function* () {
    const api = yield* KubeApi
    yield* api.create(R.Namespaces, undefined, namespaceObject(ns)).pipe(Effect.catchIf((e) => e.reason === "AlreadyExists", () => Effect.void))
    return api
  })

  it.live("the client-side limiter holds 40 GETs at qps 20 (burst 30, 1.5 × the cap) to at least (40 - 30) / 20 s", () =>
    Effect.gen(function* () {
      const api = yield* setup
      const started = Date.now()
      yield* Effect.forEach(Array.from({ length: 40 }), () => Effect.either(api.get(R.IPPools, ns, "none")), { concurrency: "unbounded" })
      const elapsed = Date.now() - started
      expect(elapsed).toBeGreaterThanOrEqual(480) // 10 tokens at 50 ms each (timer granularity: a few ms early at most)
      expect(elapsed).toBeLessThan(10_000)
    }).pipe(Effect.provide(liveKubeApi({ apiQps: 20 }))))

  it.live("API Priority and Fairness: a real server names the flow schema and priority level of a request, and --log-level debug shows them once", () =>
    Effect.gen(function* () {
      const api = yield* setup
      const lines: Array<Record<string, unknown>> = []
      const logger = Logger.make(({ message, annotations }) => {
        if (String(message).includes("Priority and Fairness")) lines.push({ message: String(message), ...Object.fromEntries(HashMap.toEntries(annotations)) })
      })
      yield* Effect.forEach(["a", "b", "c"], (name) => Effect.either(api.get(R.IPPools, ns, name))).pipe(
        Logger.withMinimumLogLevel(LogLevel.Debug),
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      )
      // One line for the three requests: the same user, so the same flow schema and priority level.
      expect(lines).toEqual([
        {
          message: "API Priority and Fairness classifies requests",
          verb: "get",
          target: `ippools ${ns}/a`,
          flowSchemaUID: expect.stringMatching(/^[0-9a-f-]{36}$/),
          priorityLevelUID: expect.stringMatching(/^[0-9a-f-]{36}$/)
        }
      ])
    }).pipe(Effect.provide(liveKubeApi())))

  it.live("errors carry the server's Status message; a watch from a compacted version fails with Gone", () =>
    Effect.gen(function* () {
      const api = yield* setup
      const missing = yield* Effect.flip(api.get(R.IPPools, ns, "nope"))
      expect(missing).toMatchObject({ reason: "NotFound", status: 404, verb: "get", target: `ippools ${ns}/nope`, detail: 'ippools.whereabouts.cni.cncf.io "nope" not found' })
      yield* api.create(R.IPPools, ns, poolObject(ns, "dup", "10.20.0.0/24"))
      const dup = yield* Effect.flip(api.create(R.IPPools, ns, poolObject(ns, "dup", "10.20.0.0/24")))
      expect(dup).toMatchObject({ reason: "AlreadyExists", status: 409, detail: 'ippools.whereabouts.cni.cncf.io "dup" already exists' })
      // The watch cache keeps no history from before its start: version 2 is long gone.
      const gone = yield* Effect.flip(Stream.runDrain(whenStorageReady(api.watch(R.IPPools, ns, { resourceVersion: "2" }))))
      expect(gone).toMatchObject({ reason: "Gone", status: 410, verb: "watch" })
      expect(gone.detail).toContain("too old resource version")
    }).pipe(Effect.provide(liveKubeApi())))

  it.live("a bad token is Unauthorized", () =>
    Effect.gen(function* () {
      const { kubeconfigPath } = runningEnvtest()
      const bad = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "badtoken-")), "kubeconfig")
      fs.writeFileSync(bad, fs.readFileSync(kubeconfigPath, "utf8").replace(/token: .*/, "token: not-the-token"))
      const denied = yield* Effect.flatMap(KubeApi, (api) => Effect.flip(api.list(R.Namespaces, undefined, { limit: 1 }))).pipe(
        Effect.provide(liveKubeApi({ kubeconfig: bad })),
        Effect.ensuring(Effect.sync(() => fs.rmSync(path.dirname(bad), { recursive: true, force: true })))
      )
      expect(denied).toMatchObject({ reason: "Unauthorized", status: 401 })
    }))

  it.live("apiserver restart: an open watch ends, requests are Unavailable meanwhile, then the same client works again", () =>
    Effect.gen(function* () {
      const api = yield* setup
      const start = yield* api.list(R.IPPools, ns, { limit: 1 })
      const watch = yield* Effect.fork(Stream.runCollect(whenStorageReady(api.watch(R.IPPools, ns, { resourceVersion: start.resourceVersion, timeoutSeconds: 300 }))))
      yield* Effect.sleep("200 millis")
      yield* Effect.promise(stopApiServer)
      const ended = yield* Fiber.join(watch).pipe(Effect.either, Effect.timeout("20 seconds"))
      expect(Either.isRight(ended) && Chunk.size(ended.right)).toBe(0)
      const down = yield* Effect.flip(api.get(R.IPPools, ns, "dup"))
      expect(down.reason).toBe("Unavailable")
      expect(down.detail).toContain("ECONNREFUSED")
      yield* Effect.promise(startApiServer)
      const back = yield* api.get(R.IPPools, ns, "dup").pipe(Effect.retry({ times: 20, while: (e) => e.reason === "Unavailable" }))
      expect(back.metadata.name).toBe("dup")
    }).pipe(Effect.provide(liveKubeApi({ requestTimeout: Duration.seconds(5) }))), 60_000)

  it.live("speaks HTTP/1.1 to an API server that would take h2 (no request goes through Node's HTTP/2 session), on kept-alive connections", () =>
    Effect.gen(function* () {
      const server = new URL(/server:\s*(\S+)/.exec(fs.readFileSync(runningEnvtest().kubeconfigPath, "utf8"))![1]!)
      // The server picks h2 for a client that offers it (so the check below means something)…
      const offered = yield* Effect.async<string | false | null, Error>((resume) => {
        const socket = tls.connect({ host: server.hostname, port: Number(server.port), ALPNProtocols: ["h2", "http/1.1"], rejectUnauthorized: false }, () => {
          resume(Effect.succeed(socket.alpnProtocol))
          socket.end()
        })
        socket.on("error", (e) => resume(Effect.fail(e)))
      })
      expect(offered).toBe("h2")
      // …and every connection the controller's transport opens, for requests and watches, is HTTP/1.1.
      const protocols = yield* connectedProtocols
      const api = yield* setup
      const start = yield* api.list(R.IPPools, ns, { limit: 1 })
      yield* Effect.all([api.list(R.Namespaces, undefined, { limit: 1 }), api.get(R.Namespaces, undefined, ns)], { concurrency: "unbounded" })
      yield* Stream.runDrain(whenStorageReady(api.watch(R.IPPools, ns, { resourceVersion: start.resourceVersion, timeoutSeconds: 1 })))
      expect(protocols.length).toBeGreaterThanOrEqual(1)
      expect([...new Set(protocols)]).toEqual(["http/1.1"])
      // Kept alive, DELETEs with their DeleteOptions body too: 20 creates and 20 deletes one after
      // another on one connection (undici closed it after each such DELETE, a TLS handshake per
      // reservation freed).
      const opened = protocols.length
      for (let i = 0; i < 20; i++) {
        yield* api.create(R.IPPools, ns, poolObject(ns, `kept-${i}`, "10.21.0.0/24"))
        yield* api.delete(R.IPPools, ns, `kept-${i}`)
      }
      expect(protocols.length - opened).toBeLessThanOrEqual(1)
    }).pipe(Effect.scoped, Effect.provide(liveKubeApi())), 30_000)

  it.live("answers come uncompressed, a 200 KB pool too (the server gzips such an answer for a client that asks)", () =>
    Effect.gen(function* () {
      const allocations = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [String(i + 1), { id: `${"c".repeat(60)}${i}`, podref: `${ns}/big-${i}`, ifname: "net1" }]))
      const api = yield* setup
      const big = yield* api.create(R.IPPools, ns, poolObject(ns, "compressed", "10.22.0.0/20", allocations))
      expect(JSON.stringify(big).length).toBeGreaterThan(200_000)
      const seen = yield* answerEncodings
      const pool = yield* api.get(R.IPPools, ns, "compressed")
      expect(Object.keys((pool.spec as { allocations: object }).allocations)).toHaveLength(2_000)
      expect(seen).toEqual(["identity"])
    }).pipe(Effect.scoped, Effect.provide(liveKubeApi())), 30_000)

  it.live("a watch gets every event while requests run beside it on the same client (1,500 objects of 8 KB)", () =>
    Effect.gen(function* () {
      // Over h2 this watch stalled after 90–154 events for good (the stream's window never reopened),
      // and an informer would have missed every change until its idle limit, minutes later.
      const api = yield* KubeApi
      const wns = uniqueNamespace("kubeapi-watch")
      yield* api.create(R.Namespaces, undefined, namespaceObject(wns))
      const start = yield* api.list(R.ConfigMaps, wns, { limit: 1 })
      let seen = 0
      yield* Effect.forkScoped(Stream.runForEach(api.watch(R.ConfigMaps, wns, { resourceVersion: start.resourceVersion, timeoutSeconds: 120 }), () => Effect.sync(() => void seen++)))
      const data = { blob: "x".repeat(8_000) }
      yield* Effect.forEach(Array.from({ length: 1_500 }, (_, i) => i), (i) => api.create(R.ConfigMaps, wns, { apiVersion: "v1", kind: "ConfigMap", metadata: { name: `c${i}` }, data }), {
        concurrency: 32
      })
      const deadline = Date.now() + 20_000
      while (seen < 1_500 && Date.now() < deadline) yield* Effect.sleep("50 millis")
      expect(seen).toBe(1_500)
      yield* api.delete(R.Namespaces, undefined, wns)
    }).pipe(Effect.scoped, Effect.provide(liveKubeApi())), 60_000)
})
