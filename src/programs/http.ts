/**
 * /healthz, /readyz and /metrics on node:http (controller-runtime's conventions: metrics on
 * :8080, probes on :8081). Port 0 disables a server. Each listens on every address: IPv6 and IPv4
 * where the host has IPv6 (the kubelet probes the pod IP, IPv6 in an IPv6-only cluster), else IPv4.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import { Data, Effect, Runtime, type Scope } from "effect"
import { ControllerConfig } from "../services/ControllerConfig.ts"
import { Metrics } from "../services/Metrics.ts"
import { optionName } from "./cli.ts"

type Handler = Effect.Effect<{ readonly status: number; readonly type: string; readonly body: string }>

/** An endpoint could not listen: one line naming the option to change and what to do (Node's own names neither). */
class ListenError extends Data.TaggedError("ListenError")<{ readonly message: string; readonly cause: NodeJS.ErrnoException }> {}

const listenError = (e: NodeJS.ErrnoException, portFlag: "metrics-port" | "health-port", port: number): ListenError => {
  const why =
    e.code === "EADDRINUSE"
      ? `port ${port} is already in use (another process listens there); choose a free port, or 0 to turn this endpoint off`
      : e.code === "EACCES"
        ? `not allowed to listen on port ${port} (ports below 1024 need privileges); choose a port above 1023`
        : `cannot listen on port ${port}: ${e.message}`
  return new ListenError({ message: `${optionName(portFlag)} ${port}: ${why}`, cause: e })
}

/** One server for the surrounding scope; answers the address it listens on. Port 0: none. */
const serve = (portFlag: "metrics-port" | "health-port", port: number, routes: Readonly<Record<string, Handler>>): Effect.Effect<ReadonlyArray<string>, ListenError, Scope.Scope> =>
  port <= 0 ? Effect.succeed([]) : Effect.acquireRelease(
    Effect.flatMap(Effect.runtime<never>(), (runtime) =>
      Effect.async<ReturnType<typeof createServer>, ListenError>((resume) => {
        const server = createServer((req: IncomingMessage, res: ServerResponse) => {
          const path = (req.url ?? "/").split("?")[0]!
          const route = routes[path]
          if (route === undefined) return void res.writeHead(404, { "content-type": "text/plain" }).end("not found\n")
          Runtime.runPromise(runtime)(route).then(
            (r) => res.writeHead(r.status, { "content-type": r.type }).end(r.body),
            (e: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(`${String(e)}\n`)
          )
        })
        server.once("error", (e: NodeJS.ErrnoException) => resume(Effect.fail(listenError(e, portFlag, port))))
        // No host: Node listens on :: (IPv6 and IPv4) where the host has IPv6, else on 0.0.0.0.
        server.listen(port, () => resume(Effect.succeed(server)))
      })
    ),
    (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
  ).pipe(
    Effect.map((server) => {
      const a = server.address()
      return a !== null && typeof a === "object" ? [a.family === "IPv6" ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`] : []
    })
  )

/** Starts the probe and metrics servers for the surrounding scope. `ready` decides /readyz. */
export const serveEndpoints = (ready: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const config = yield* ControllerConfig
    const metrics = yield* Metrics
    const text = (status: number, body: string) => ({ status, type: "text/plain; charset=utf-8", body })
    // Registered before the servers, so it runs once both have closed (a shutdown's progress).
    yield* Effect.addFinalizer(() => Effect.logInfo("stopped serving probes and metrics"))
    const health = yield* serve("health-port", config.healthPort, {
      "/healthz": Effect.succeed(text(200, "ok\n")),
      "/readyz": Effect.map(ready, (ok) => (ok ? text(200, "ok\n") : text(503, "informers not synced\n")))
    })
    const metricsAt = yield* serve("metrics-port", config.metricsPort, {
      "/metrics": Effect.map(metrics.render, (m) => ({ status: 200, type: m.contentType, body: m.body }))
    })
    yield* Effect.logInfo("serving probes and metrics").pipe(
      Effect.annotateLogs({ healthPort: config.healthPort, metricsPort: config.metricsPort, listening: [...health, ...metricsAt].join(" ") })
    )
  })
