/**
 * The controller process pointed at an API server it cannot reach, as a user starts it: it says so
 * once, naming the server, instead of a warning per informer per retry; and once more when the
 * server answers again. The server is a loopback port that refuses connections until a forwarder
 * to the real kube-apiserver opens on it (its certificate names 127.0.0.1, whatever the port).
 */
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { describeLive, runningEnvtest, uniqueNamespace } from "../support/live.ts"
import { type ControllerProcess, freePort, startController, stopAllControllers } from "./support/controller-process.ts"
import { ensureNamespace, liveWorld } from "./support/world.ts"

/** A TCP forwarder on `port` to the API server's port; closed with the scope. */
const forwarder = (port: number, to: URL) =>
  Effect.acquireRelease(
    Effect.promise(
      () =>
        new Promise<{ readonly server: net.Server; readonly sockets: Set<net.Socket> }>((resolve, reject) => {
          const sockets = new Set<net.Socket>()
          const server = net.createServer((client) => {
            const upstream = net.connect(Number(to.port), to.hostname)
            for (const s of [client, upstream]) {
              sockets.add(s)
              s.on("error", () => (client.destroy(), upstream.destroy()))
              s.on("close", () => sockets.delete(s))
            }
            client.pipe(upstream).pipe(client)
          })
          server.once("error", reject)
          server.listen(port, "127.0.0.1", () => resolve({ server, sockets }))
        })
    ),
    ({ server, sockets }) =>
      Effect.promise(() => {
        for (const s of sockets) s.destroy()
        return new Promise((resolve) => server.close(resolve))
      })
  )

const lines = (c: ControllerProcess, level: string, pattern: RegExp) => c.logs().filter((l) => l.logLevel === level && pattern.test(l.message))

const until = (what: string, c: ControllerProcess, done: () => boolean | Promise<boolean>, timeoutMs: number) =>
  Effect.promise(async () => {
    const deadline = Date.now() + timeoutMs
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`${what} within ${timeoutMs} ms; the controller's log:\n${c.tail(60)}`)
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  })

describeLive("a controller that cannot reach its API server", () => {
  afterEach(() => stopAllControllers(), 60_000)

  it.scopedLive("says so once, naming the server, not once per informer per retry; and once when it reaches it again", () =>
    Effect.gen(function* () {
      const namespace = uniqueNamespace("unreach")
      yield* ensureNamespace(namespace).pipe(Effect.provide(liveWorld(namespace)))
      const port = yield* Effect.promise(freePort)
      const server = `https://127.0.0.1:${port}`
      const real = new URL(runningEnvtest().server)
      const kubeconfig = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "unreachable-")), "kubeconfig")
      fs.writeFileSync(kubeconfig, fs.readFileSync(runningEnvtest().kubeconfigPath, "utf8").replaceAll(runningEnvtest().server, server))

      const controller = yield* Effect.promise(() => startController({ kubeconfig, namespace }))
      // Seven informers and the lease retry with backoff: about fifty failed attempts in ten seconds.
      yield* Effect.sleep("10 seconds")
      const cannotReach = new RegExp(`^cannot reach ${server.replaceAll(".", "\\.")} since \\d\\d:\\d\\d:\\d\\d: connection refused$`)
      expect(lines(controller, "WARN", cannotReach), controller.tail(60)).toHaveLength(1)
      expect(controller.logs().filter((l) => l.message.startsWith("cannot reach"))).toHaveLength(1)
      // What else may warn once at start-up (the schedule's ConfigMap could not be read), but no
      // warning per attempt: none repeated, and a handful at most.
      const warnings = controller.logs().filter((l) => l.logLevel === "WARN").map((l) => l.message)
      expect(warnings.length, warnings.join("\n")).toBeLessThanOrEqual(3)
      expect(new Set(warnings).size, warnings.join("\n")).toBe(warnings.length)
      expect(controller.logs().some((l) => l.message.includes("failed, restarting") || l.message.startsWith("error retrieving lease"))).toBe(false)

      yield* forwarder(port, real)
      const reached = new RegExp(`^reached ${server.replaceAll(".", "\\.")} after \\d+ s$`)
      yield* until("no 'reached' line", controller, () => lines(controller, "INFO", reached).length > 0, 60_000)
      yield* until("not ready", controller, async () => (await controller.probe("/readyz")) === 200, 60_000)
      expect(lines(controller, "INFO", reached)).toHaveLength(1)
      expect(controller.logs().filter((l) => l.message.startsWith("cannot reach"))).toHaveLength(1)
      yield* Effect.promise(() => controller.stop())
    }), 120_000)
})
