/**
 * The chaos proxy between the controllers (only them) and kube-apiserver. It terminates TLS with
 * the API server's own serving certificate (which the controllers' kubeconfig trusts), so
 * verification stays on, and forwards each request over its own TLS connection: seeing HTTP lets
 * it answer 429 as API Priority and Fairness does and delay requests; stalls and resets act on the
 * sockets. An unreachable API server is passed on as a reset, never a 502 a real path would not give.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import * as path from "node:path"
import { setTimeout as sleep } from "node:timers/promises"

const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"])
const endToEnd = (headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders =>
  Object.fromEntries(Object.entries(headers).filter(([k, v]) => !HOP_BY_HOP.has(k.toLowerCase()) && v !== undefined))

/** APF's rejection, as kube-apiserver writes it. */
const tooManyRequests = (retryAfter: number) =>
  JSON.stringify({
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: "Too many requests, please try again later.",
    reason: "TooManyRequests",
    details: { retryAfterSeconds: retryAfter },
    code: 429
  })

/** A TCP reset where the socket still owns its handle, else a plain close. */
const reset = (s: net.Socket) => {
  try {
    s.resetAndDestroy()
  } catch {
    s.destroy()
  }
}

/** Starts the proxy on a free loopback port in front of `target` (`https://127.0.0.1:<port>`), with the apiserver's cert from `certDir`. */
export const startProxy = async (target: string, certDir: string) => {
  const cert = fs.readFileSync(path.join(certDir, "apiserver.crt"))
  const key = fs.readFileSync(path.join(certDir, "apiserver.key"))
  const upstream = new URL(target)
  const agent = new https.Agent({ keepAlive: true, ca: cert, maxSockets: Number.POSITIVE_INFINITY })
  const mode = { stalled: false, refusing: false, delayMs: 0, throttle: undefined as { readonly share: number; readonly retryAfter: number; readonly random: () => number } | undefined }
  const stallWaiters: Array<() => void> = []
  const sockets = new Set<net.Socket>()
  const streaming = new Set<http.IncomingMessage>()
  /** Answers passed through by HTTP status; 429s the proxy made up; connections reset (by a drop, or the API server unreachable). */
  const stats = { forwarded: {} as Record<string, number>, throttled: 0, resets: 0 }

  const forward = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const up = https.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: endToEnd(req.headers), agent })
    up.on("response", (ur) => {
      const code = String(ur.statusCode ?? 0)
      stats.forwarded[code] = (stats.forwarded[code] ?? 0) + 1
      res.writeHead(ur.statusCode ?? 502, endToEnd(ur.headers))
      streaming.add(ur)
      if (mode.stalled) ur.pause()
      ur.on("data", (chunk: Buffer) => {
        if (!res.write(chunk)) {
          ur.pause()
          res.once("drain", () => mode.stalled || ur.resume())
        }
      })
      ur.on("end", () => res.end())
      ur.on("close", () => streaming.delete(ur))
      ur.on("error", () => res.destroy())
    })
    up.on("error", () => {
      stats.resets++
      req.socket.destroy()
    })
    // The client gave up (a timeout, a closed watch): so does the request upstream.
    res.on("close", () => res.writableFinished || up.destroy())
    req.pipe(up)
  }

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (mode.stalled) await new Promise<void>((resume) => stallWaiters.push(resume))
    if (mode.delayMs > 0) await sleep(mode.delayMs)
    if (req.socket.destroyed) return
    const t = mode.throttle
    if (t !== undefined && t.random() < t.share) {
      stats.throttled++
      res.writeHead(429, { "Content-Type": "application/json", "Retry-After": String(t.retryAfter) })
      res.end(tooManyRequests(t.retryAfter))
      return
    }
    forward(req, res)
  }

  const server = https.createServer({ cert, key, keepAliveTimeout: 60_000 }, (req, res) => void handle(req, res))
  server.on("connection", (socket: net.Socket) => {
    if (mode.refusing) {
      stats.resets++
      reset(socket)
      return
    }
    sockets.add(socket)
    socket.on("close", () => sockets.delete(socket))
  })
  server.on("tlsClientError", () => undefined)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0

  const during = async (ms: number, on: () => void, off: () => void) => {
    on()
    try {
      await sleep(ms)
    } finally {
      off()
    }
  }
  return {
    url: `https://127.0.0.1:${port}`,
    /** Holds new requests and pauses every response for `ms`. */
    stall: (ms: number) =>
      during(
        ms,
        () => {
          mode.stalled = true
          for (const r of streaming) r.pause()
        },
        () => {
          mode.stalled = false
          for (const r of streaming) r.resume()
          for (const resume of stallWaiters.splice(0)) resume()
        }
      ),
    /** Resets every connection, and every new one for `ms`. */
    drop: (ms: number) =>
      during(
        ms,
        () => {
          mode.refusing = true
          for (const s of sockets) {
            stats.resets++
            reset(s)
          }
        },
        () => void (mode.refusing = false)
      ),
    /** Answers `share` of the requests 429 with `Retry-After: retryAfter` for `ms`. */
    throttle: (ms: number, share: number, retryAfter: number, random: () => number) => during(ms, () => void (mode.throttle = { share, retryAfter, random }), () => void (mode.throttle = undefined)),
    /** Holds every request `delayMs` before forwarding it, for `ms`. */
    slow: (ms: number, delayMs: number) => during(ms, () => void (mode.delayMs = delayMs), () => void (mode.delayMs = 0)),
    stats: () => ({ forwarded: { ...stats.forwarded }, throttled: stats.throttled, resets: stats.resets }),
    close: async () => {
      for (const resume of stallWaiters.splice(0)) resume()
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      agent.destroy()
    }
  }
}

export type ChaosProxy = Awaited<ReturnType<typeof startProxy>>
