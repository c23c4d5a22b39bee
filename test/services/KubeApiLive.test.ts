/**
 * KubeApiLive without a real API server: kubeconfig resolution, the status/network → reason table,
 * the rate limiter under TestClock, and the HTTP behaviour against a small fake server (request
 * shapes, one kept-alive connection, timeouts, watch framing). The real server: test/live/.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, ConfigProvider, Duration, Effect, Fiber, HashMap, Layer, Logger, LogLevel, Ref, Stream, TestClock } from "effect"
import { afterAll, beforeAll, vi } from "vitest"
import { programKubeApi } from "../../src/programs/layers.ts"
import { MAX_RETRY_AFTER } from "../../src/services/ApiFlow.ts"
import { layerWith } from "../../src/services/ControllerConfig.ts"
import { KubeApi } from "../../src/services/KubeApi.ts"
import * as Metrics from "../../src/services/Metrics.ts"
import * as R from "../../src/services/resources.ts"
import { rateLimiter } from "../../src/services/TokenBucket.ts"
import { freePort } from "../live/cluster.ts"

// client-node 2 and undici 8 do not load below Node 22.19 (see API-NOTES): run through npm/npx.
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
const supported = major > 22 || (major === 22 && minor >= 19)
const Live = supported ? await import("../../src/services/KubeApiLive.ts") : undefined
const describeSupported = supported ? describe : describe.skip
const live = () => Live!

// Created by the first test that writes a file: a file whose tests are all skipped or filtered
// out (vitest -t) runs no afterAll, and a directory made at load time was left behind.
let made = ""
const tmp = (): string => (made === "" ? (made = fs.mkdtempSync(path.join(os.tmpdir(), "kubeapilive-test-"))) : made)
afterAll(() => (made === "" ? undefined : fs.rmSync(made, { recursive: true, force: true })))

const kubeconfigText = (server: string, extra: { readonly insecure?: boolean; readonly token?: string; readonly context?: string | null } = {}) =>
  [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: c",
    "  cluster:",
    `    server: ${server}`,
    ...(extra.insecure === true ? ["    insecure-skip-tls-verify: true"] : []),
    "users:",
    "- name: u",
    "  user:",
    `    token: ${extra.token ?? "t0k3n"}`,
    "contexts:",
    "- name: ctx",
    "  context: {cluster: c, user: u}",
    ...(extra.context === null ? [] : [`current-context: ${extra.context ?? "ctx"}`]),
    ""
  ].join("\n")

const writeFile = (name: string, text: string): string => {
  const file = path.join(tmp(), name)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, text)
  return file
}

const resolveError = (sources: Parameters<NonNullable<typeof Live>["resolveKubeConfig"]>[0]) =>
  live()
    .resolveKubeConfig(sources)
    .pipe(
      Effect.flip,
      Effect.map((e) => e.message)
    )

describeSupported("KubeApiLive: kubeconfig resolution", () => {
  it.effect("with nothing to use, the error names every source tried and why it failed", () =>
    Effect.gen(function* () {
      const message = yield* resolveError({ explicit: undefined, home: path.join(tmp(), "nohome"), serviceHost: undefined })
      expect(message).toContain("(1) KUBECONFIG/--kubeconfig: not set")
      expect(message).toContain(`(2) ~/.kube/config (${path.join(tmp(), "nohome", ".kube", "config")}): no such file`)
      expect(message).toContain("(3) in-cluster service account: KUBERNETES_SERVICE_HOST is not set")
      const noToken = yield* resolveError({ explicit: undefined, home: undefined, serviceHost: "10.0.0.1", serviceAccountPrefix: tmp() })
      expect(noToken).toContain("~/.kube/config: no home directory")
      expect(noToken).toContain(`in-cluster service account: no token at ${tmp()}/var/run/secrets/kubernetes.io/serviceaccount/token`)
    }))

  it.effect("an explicit kubeconfig that is missing or broken is an error, never a fallback", () =>
    Effect.gen(function* () {
      const home = path.join(tmp(), "home-ok")
      writeFile("home-ok/.kube/config", kubeconfigText("https://10.9.9.9:6443"))
      const missing = yield* resolveError({ explicit: path.join(tmp(), "absent"), home, serviceHost: undefined })
      expect(missing).toContain(`KUBECONFIG/--kubeconfig (${path.join(tmp(), "absent")}): no such file`)
      expect(missing).toContain("were not tried")
      const broken = writeFile("broken.yaml", "clusters: [unclosed")
      expect(yield* resolveError({ explicit: broken, home, serviceHost: undefined })).toContain(`KUBECONFIG/--kubeconfig (${broken}):`)
      const noContext = writeFile("nocontext.yaml", kubeconfigText("https://10.9.9.9:6443", { context: null }))
      expect(yield* resolveError({ explicit: noContext, home, serviceHost: undefined })).toContain("no current-context")
      const unknown = writeFile("unknown.yaml", kubeconfigText("https://10.9.9.9:6443", { context: "nope" }))
      expect(yield* resolveError({ explicit: unknown, home, serviceHost: undefined })).toContain(`current-context "nope" names no known cluster`)
    }))

  it.effect("KUBECONFIG may list several files; ~/.kube/config is next; then the service account", () =>
    Effect.gen(function* () {
      const a = writeFile("list/a.yaml", kubeconfigText("https://10.1.1.1:6443"))
      const b = writeFile("list/b.yaml", kubeconfigText("https://10.2.2.2:6443").replaceAll("name: c", "name: c2").replace("cluster: c,", "cluster: c2,"))
      const listed = yield* live().resolveKubeConfig({ explicit: `${a}${path.delimiter}${b}`, home: undefined, serviceHost: undefined })
      // Merged like kubectl: names already seen (user "u", context "ctx") keep the first file's entry.
      expect(listed.kc.getClusters().map((c) => c.server)).toEqual(["https://10.1.1.1:6443", "https://10.2.2.2:6443"])
      expect(listed.kc.getUsers()).toHaveLength(1)
      expect(listed.kc.getCurrentCluster()?.server).toBe("https://10.1.1.1:6443")

      const home = path.join(tmp(), "home-ok")
      writeFile("home-ok/.kube/config", kubeconfigText("https://10.9.9.9:6443"))
      const fromHome = yield* live().resolveKubeConfig({ explicit: undefined, home, serviceHost: "10.0.0.1" })
      expect(fromHome.source).toBe(`~/.kube/config (${path.join(home, ".kube", "config")})`)

      writeFile("sa/var/run/secrets/kubernetes.io/serviceaccount/token", "sa-token")
      writeFile("sa/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", "")
      vi.stubEnv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
      vi.stubEnv("KUBERNETES_SERVICE_PORT", "443")
      try {
        const inCluster = yield* live().resolveKubeConfig({ explicit: undefined, home: undefined, serviceHost: "10.0.0.1", serviceAccountPrefix: path.join(tmp(), "sa") })
        expect(inCluster.source).toBe("in-cluster service account")
        expect(inCluster.kc.getCurrentCluster()?.server).toBe("https://10.0.0.1:443")
      } finally {
        vi.unstubAllEnvs()
      }
    }))

  it.effect("layerLive fails to build with a KubeConfigError; http:// needs insecure-skip-tls-verify", () =>
    Effect.gen(function* () {
      const none = yield* Layer.build(live().layerLive).pipe(
        Effect.scoped,
        Effect.provide(layerWith({ kubeconfig: undefined })),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["HOME", path.join(tmp(), "nohome")]]))),
        Effect.flip
      )
      expect(none._tag).toBe("KubeConfigError")
      expect(none.message).toMatch(/KUBECONFIG.*not set.*~\/\.kube\/config.*no such file.*KUBERNETES_SERVICE_HOST is not set/)
      const plain = writeFile("plain-http.yaml", kubeconfigText("http://127.0.0.1:1"))
      const http = yield* Layer.build(live().layerLive).pipe(Effect.scoped, Effect.provide(layerWith({ kubeconfig: plain })), Effect.flip)
      expect(http.message).toContain("credentials or TLS files are unusable: HTTP protocol is not allowed")
    }))
})

describeSupported("KubeApiLive: statuses and failures become reasons", () => {
  const status = (code: number, message: string) => JSON.stringify({ kind: "Status", apiVersion: "v1", status: "Failure", message, code })
  it.effect.each([
    [400, "get", "BadRequest"],
    [401, "get", "Unauthorized"],
    [403, "list", "Forbidden"],
    [404, "get", "NotFound"],
    [409, "create", "AlreadyExists"],
    [409, "replace", "Conflict"],
    [409, "delete", "Conflict"],
    [410, "list", "Gone"],
    [422, "patch", "Invalid"],
    [429, "get", "TooManyRequests"],
    [500, "get", "Unavailable"],
    [503, "get", "Unavailable"],
    [504, "get", "Timeout"],
    [418, "get", "Unknown"]
  ] as const)("HTTP %i on %s → %s, the Status message as detail", ([code, verb, reason]) =>
    Effect.sync(() => {
      const e = live().errorFromResponse(verb, "ippools ns/p", code, status(code, `message ${code}`))
      expect(e).toMatchObject({ reason, status: code, verb, target: "ippools ns/p", detail: `message ${code}` })
    }))

  it("a body that is no Status is the detail as text; an empty one says the code", () => {
    expect(live().errorFromResponse("get", "pods", 503, "upstream connect error\n").detail).toBe("upstream connect error")
    expect(live().errorFromResponse("get", "pods", 502, "").detail).toBe("HTTP 502")
    expect(live().errorFromResponse("get", "pods", 500, '{"kind":"Pod"}').detail).toBe('{"kind":"Pod"}')
  })

  const failed = (code: string, message: string) => new TypeError("fetch failed", { cause: Object.assign(new Error(message), { code }) })
  it.each([
    [failed("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:6443"), "Unavailable", "ECONNREFUSED"],
    [failed("ECONNRESET", "read ECONNRESET"), "Unavailable", "ECONNRESET"],
    [failed("ENOTFOUND", "getaddrinfo ENOTFOUND api.example"), "Unavailable", "ENOTFOUND"],
    [failed("EAI_AGAIN", "getaddrinfo EAI_AGAIN api.example"), "Unavailable", "EAI_AGAIN"],
    [failed("UND_ERR_SOCKET", "other side closed"), "Unavailable", "UND_ERR_SOCKET"],
    [failed("DEPTH_ZERO_SELF_SIGNED_CERT", "self-signed certificate"), "Unavailable", "DEPTH_ZERO_SELF_SIGNED_CERT"],
    [failed("UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error"), "Timeout", "UND_ERR_CONNECT_TIMEOUT"],
    [failed("UND_ERR_HEADERS_TIMEOUT", "Headers Timeout Error"), "Timeout", "UND_ERR_HEADERS_TIMEOUT"],
    [new DOMException("This operation was aborted", "AbortError"), "Timeout", "aborted"],
    [new TypeError("fetch failed"), "Unavailable", "fetch failed"],
    [new Error("something else"), "Unknown", "something else"]
  ] as const)("%s → %s", (failure, reason, inDetail) => {
    const e = live().errorFromFailure("get", "pods ns/p", failure)
    expect(e.reason).toBe(reason)
    expect(e.status).toBeUndefined()
    expect(e.detail).toContain(inDetail)
    // The failure itself is kept, chain and all, not only its text.
    expect(e.cause).toBe(failure)
  })
})

describeSupported("KubeApiLive: rate limiter (TestClock)", () => {
  it.scoped("qps 20 / burst 30: 30 requests at once, then one every 50 ms", () =>
    Effect.gen(function* () {
      const limiter = yield* rateLimiter(20, 30)
      const done = yield* Ref.make(0)
      const fiber = yield* Effect.forkScoped(Effect.forEach(Array.from({ length: 40 }), () => limiter(Ref.update(done, (n) => n + 1)), { concurrency: "unbounded" }))
      yield* TestClock.adjust(0)
      expect(yield* Ref.get(done)).toBe(30)
      yield* TestClock.adjust("49 millis")
      expect(yield* Ref.get(done)).toBe(30)
      yield* TestClock.adjust("1 millis")
      expect(yield* Ref.get(done)).toBe(31)
      yield* TestClock.adjust("450 millis")
      expect(yield* Ref.get(done)).toBe(40)
      yield* Fiber.join(fiber)
      // Idle time refills the bucket up to the burst again, no further.
      yield* TestClock.adjust("10 seconds")
      yield* Effect.forkScoped(Effect.forEach(Array.from({ length: 35 }), () => limiter(Ref.update(done, (n) => n + 1)), { concurrency: "unbounded" }))
      yield* TestClock.adjust(0)
      expect(yield* Ref.get(done)).toBe(70)
    }))

  it.scoped("an interrupted wait frees its slot only when it was the last one reserved, never more than the limit", () =>
    Effect.gen(function* () {
      const limiter = yield* rateLimiter(20, 30)
      const done = yield* Ref.make(0)
      const go = limiter(Ref.update(done, (n) => n + 1))
      yield* Effect.forEach(Array.from({ length: 30 }), () => go, { discard: true })
      // Ten waiters hold the slots at 50, 100, …, 500 ms.
      const waiters = yield* Effect.forEach(Array.from({ length: 10 }), () => Effect.forkScoped(go))
      yield* TestClock.adjust(0)
      // The first one gives up: the others keep their slots, so a newcomer gets the slot after them.
      yield* Fiber.interrupt(waiters[0]!)
      const newcomer = yield* Effect.forkScoped(go)
      yield* TestClock.adjust("500 millis")
      expect(yield* Ref.get(done)).toBe(30 + 9)
      yield* TestClock.adjust("50 millis")
      expect(yield* Ref.get(done)).toBe(30 + 10)
      yield* Fiber.join(newcomer)
      // The last one reserved gives up: its slot is free again for the next request.
      const more = yield* Effect.forEach(Array.from({ length: 2 }), () => Effect.forkScoped(go))
      yield* TestClock.adjust(0)
      yield* Fiber.interrupt(more[1]!)
      const next = yield* Effect.forkScoped(go)
      yield* TestClock.adjust("50 millis")
      expect(yield* Ref.get(done)).toBe(41)
      yield* TestClock.adjust("50 millis")
      expect(yield* Ref.get(done)).toBe(42)
      yield* Fiber.join(next)
    }))

  it.scoped("qps ≤ 0 turns client-side limiting off", () =>
    Effect.gen(function* () {
      const limiter = yield* rateLimiter(0, 1)
      const n = yield* Effect.forEach(Array.from({ length: 100 }), () => limiter(Effect.succeed(1)), { concurrency: "unbounded" })
      expect(n).toHaveLength(100)
    }))
})

// ---------------------------------------------------------------------------------------------
// Against a fake HTTP server

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}
type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void

const fake = { server: undefined as http.Server | undefined, url: "", handler: undefined as Handler | undefined, seen: [] as Array<Seen>, connections: 0, closed: 0 }
beforeAll(async () => {
  if (!supported) return
  const server = http.createServer((req, res) => {
    let body = ""
    req.on("data", (c: Buffer) => (body += c.toString()))
    req.on("end", () => {
      fake.seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body })
      fake.handler?.(req, res, body)
    })
    req.on("close", () => fake.closed++)
  })
  server.on("connection", () => fake.connections++)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  fake.server = server
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  fake.server?.closeAllConnections()
  await new Promise((resolve) => (fake.server === undefined ? resolve(undefined) : fake.server.close(resolve)))
})

const serve = (handler: Handler) => {
  fake.handler = handler
  fake.seen.length = 0
  fake.closed = 0
}
const json = (res: http.ServerResponse, code: number, body: unknown) => res.writeHead(code, { "Content-Type": "application/json" }).end(JSON.stringify(body))

const fakeApi = (overrides: Parameters<typeof layerWith>[0] = {}) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      const kubeconfig = writeFile("fake.yaml", kubeconfigText(fake.url, { insecure: true, token: "fake-token" }))
      return live().layerLive.pipe(Layer.provide(layerWith({ kubeconfig, apiQps: 1000, ...overrides })), Layer.orDie)
    })
  )

/** The fake server's KubeApi as the programs stack it: counted, under ApiFlow's flow control. */
const fakeFlowApi = (overrides: Parameters<typeof layerWith>[0] = {}) =>
  programKubeApi(fakeApi(overrides)).pipe(Layer.provide(Layer.merge(Metrics.layer, layerWith(overrides))))

const pod = (name: string, rv: string) => ({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: "ns", resourceVersion: rv } })

describeSupported("KubeApiLive: HTTP against a fake server", () => {
  it.live("requests: methods, paths, query, content types, auth, DeleteOptions; kept-alive connections", () =>
    Effect.gen(function* () {
      serve((req, res, body) => {
        if (req.url?.startsWith("/api/v1/namespaces/ns/pods?")) return json(res, 200, { kind: "PodList", metadata: { resourceVersion: "7", continue: "next" }, items: [{ metadata: { name: "a" } }] })
        if (req.method === "DELETE") return json(res, 200, { kind: "Status", status: "Success" })
        return json(res, req.method === "POST" ? 201 : 200, { ...(JSON.parse(body || "{}") as object), metadata: { name: "p", namespace: "ns", resourceVersion: "8" } })
      })
      const before = fake.connections
      const api = yield* KubeApi
      const page = yield* api.list(R.Pods, "ns", { limit: 2, continue: "tok", labelSelector: "a=b", fieldSelector: "spec.nodeName=n1" })
      expect(page).toEqual({ items: [{ apiVersion: "v1", kind: "Pod", metadata: { name: "a" } }], resourceVersion: "7", continue: "next" })
      yield* api.create(R.IPPools, "ns", { metadata: { name: "p" }, spec: { range: "10.0.0.0/24", allocations: {} } })
      yield* api.patch(R.IPPools, "ns", "p", { type: "json", ops: [{ op: "remove", path: "/spec/allocations/1" }] })
      yield* api.patch(R.IPPools, "ns", "p", { type: "merge", body: { metadata: { labels: { a: "b" } } } })
      yield* api.delete(R.IPPools, "ns", "p", { gracePeriodSeconds: 0, preconditions: { resourceVersion: "8" } })
      yield* api.get(R.Namespaces, undefined, "ns")
      for (let i = 0; i < 20; i++) yield* api.get(R.Namespaces, undefined, "ns")
      const [list, create, jsonPatch, mergePatch, del, get] = fake.seen
      expect(new URL(list!.url, fake.url).searchParams.toString()).toBe("limit=2&continue=tok&labelSelector=a%3Db&fieldSelector=spec.nodeName%3Dn1")
      expect([create!.method, create!.url, create!.headers["content-type"]]).toEqual(["POST", "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/ns/ippools", "application/json"])
      expect(JSON.parse(create!.body)).toMatchObject({ apiVersion: "whereabouts.cni.cncf.io/v1alpha1", kind: "IPPool" })
      expect([jsonPatch!.method, jsonPatch!.headers["content-type"], jsonPatch!.body]).toEqual(["PATCH", "application/json-patch+json", '[{"op":"remove","path":"/spec/allocations/1"}]'])
      expect(mergePatch!.headers["content-type"]).toBe("application/merge-patch+json")
      expect(JSON.parse(del!.body)).toEqual({ kind: "DeleteOptions", apiVersion: "v1", gracePeriodSeconds: 0, preconditions: { resourceVersion: "8" } })
      expect([get!.url, get!.headers["authorization"], get!.headers["user-agent"]]).toEqual(["/api/v1/namespaces/ns", "Bearer fake-token", "whereabouts-controller"])
      // 26 requests over a few kept-alive connections, not one each (undici's pool may open a second
      // while the first is being released, and retires one after a DELETE with a body).
      expect(fake.connections - before).toBeLessThanOrEqual(4)
    }).pipe(Effect.provide(fakeApi())))

  it.live("namesOnly: asks for a Table of names (includeObject=None) and reads its name column; a server that sends a list instead is read as names too", () =>
    Effect.gen(function* () {
      const table = {
        kind: "Table",
        apiVersion: "meta.k8s.io/v1",
        metadata: { resourceVersion: "12", continue: "next" },
        columnDefinitions: [{ name: "Ready", type: "string", format: "" }, { name: "Name", type: "string", format: "name" }],
        rows: [{ cells: ["1/1", "a"], object: null }, { cells: ["0/1", "b"], object: null }]
      }
      serve((req, res) => json(res, 200, req.url?.includes("plain") ? { kind: "PodList", metadata: { resourceVersion: "13" }, items: [{ metadata: { name: "c", uid: "u" }, spec: {} }] } : table))
      const api = yield* KubeApi
      const page = yield* api.list(R.Pods, "ns", { namesOnly: true, limit: 2 })
      expect(page).toEqual({
        items: [
          { apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: { name: "a", namespace: "ns" } },
          { apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: { name: "b", namespace: "ns" } }
        ],
        resourceVersion: "12",
        continue: "next"
      })
      const asked = fake.seen[0]!
      expect(new URL(asked.url, fake.url).searchParams.get("includeObject")).toBe("None")
      expect(String(asked.headers["accept"])).toMatch(/^application\/json;as=Table;g=meta\.k8s\.io;v=v1,/)
      const plain = yield* api.list(R.Pods, "plain", { namesOnly: true })
      expect(plain.items).toEqual([{ apiVersion: "meta.k8s.io/v1", kind: "PartialObjectMetadata", metadata: { name: "c", namespace: "plain" } }])
      serve((_req, res) => json(res, 200, { ...table, columnDefinitions: [{ name: "Ready", type: "string", format: "" }] }))
      expect(yield* Effect.flip(api.list(R.Pods, "ns", { namesOnly: true }))).toMatchObject({ reason: "Unknown", detail: "malformed response: expected a table with a name column" })
    }).pipe(Effect.provide(fakeApi())))

  it.live("asks for answers uncompressed (Accept-Encoding: identity), watches too", () =>
    Effect.gen(function* () {
      const asked: Array<string> = []
      serve((req, res) => {
        asked.push(String(req.headers["accept-encoding"]))
        json(res, 200, { kind: "PodList", metadata: { resourceVersion: "9" }, items: [] })
      })
      const api = yield* KubeApi
      yield* api.list(R.Pods, "ns")
      yield* Effect.either(api.get(R.Pods, "ns", "p"))
      // fetch, which a watch goes through, would ask for gzip by itself.
      yield* Effect.either(Stream.runDrain(api.watch(R.Pods, "ns", { resourceVersion: "9" })))
      expect(asked).toEqual(["identity", "identity", "identity"])
    }).pipe(Effect.provide(fakeApi())))

  it.live("a Status body becomes the detail; no answer within requestTimeout is a Timeout; a closed port is Unavailable", () =>
    Effect.gen(function* () {
      serve((req, res) => {
        if (req.url?.includes("slow")) return // never answers
        json(res, 404, { kind: "Status", status: "Failure", reason: "NotFound", message: 'pods "x" not found', code: 404 })
      })
      const api = yield* KubeApi
      expect(yield* Effect.flip(api.get(R.Pods, "ns", "x"))).toMatchObject({ reason: "NotFound", status: 404, target: "pods ns/x", detail: 'pods "x" not found' })
      const slow = yield* Effect.flip(api.get(R.Pods, "ns", "slow"))
      expect(slow).toMatchObject({ reason: "Timeout", verb: "get", target: "pods ns/slow" })
      // Nothing listens there: a port drawn below the ephemeral range, bound and closed again.
      const closedPort = yield* Effect.promise(freePort)
      const closed = writeFile("closed.yaml", kubeconfigText(`http://127.0.0.1:${closedPort}`, { insecure: true }))
      const refused = yield* Effect.flip(
        Effect.flatMap(KubeApi, (other) => other.get(R.Pods, "ns", "x")).pipe(Effect.provide(live().layerLive.pipe(Layer.provide(layerWith({ kubeconfig: closed })), Layer.orDie)))
      )
      expect(refused.reason).toBe("Unavailable")
      expect(refused.detail).toContain("ECONNREFUSED")
    }).pipe(Effect.provide(fakeApi({ requestTimeout: Duration.millis(300) }))))

  it.live("a server that cannot be reached is said once however many requests and watches fail, and once when it answers again", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(freePort)
      const server = `http://127.0.0.1:${port}`
      const kubeconfig = writeFile("later.yaml", kubeconfigText(server, { insecure: true }))
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => void lines.push(`${logLevel.label} ${String(message)}`))
      yield* Effect.gen(function* () {
        const api = yield* KubeApi
        for (let i = 0; i < 3; i++) expect(yield* Effect.flip(api.get(R.Pods, "ns", "p"))).toMatchObject({ reason: "Unavailable" })
        expect(yield* Effect.flip(Stream.runDrain(api.watch(R.Pods, "ns", { resourceVersion: "1" })))).toMatchObject({ reason: "Unavailable" })
        expect(lines).toEqual([expect.stringMatching(new RegExp(`^WARN cannot reach ${server} since \\d\\d:\\d\\d:\\d\\d: connection refused$`))])
        const up = http.createServer((_req, res) => json(res, 200, pod("p", "1")))
        yield* Effect.acquireRelease(
          Effect.promise(() => new Promise<void>((resolve) => up.listen(port, "127.0.0.1", resolve))),
          () => Effect.promise(() => new Promise((resolve) => (up.closeAllConnections(), up.close(resolve))))
        )
        for (let i = 0; i < 3; i++) expect((yield* api.get(R.Pods, "ns", "p")).metadata.name).toBe("p")
        expect(lines.slice(1)).toEqual([expect.stringMatching(new RegExp(`^INFO reached ${server} after \\d+ s$`))])
      }).pipe(
        Effect.scoped,
        Effect.provide(Layer.merge(live().layerLive.pipe(Layer.provide(layerWith({ kubeconfig })), Layer.orDie), Logger.replace(Logger.defaultLogger, logger)))
      )
    }))

  it.live("credentials that never come (a credential plugin that hangs) end as a Timeout within requestTimeout, the request never sent", () =>
    Effect.gen(function* () {
      serve((_req, res) => json(res, 200, pod("p", "1")))
      const dispatcher = new (yield* Effect.promise(() => import("undici"))).Agent()
      const hanging = { server: fake.url, dispatcher, headers: () => new Promise<Record<string, string>>(() => {}) }
      const api = live().makeLiveKubeApi({ transport: hanging, limiter: (effect) => effect, requestTimeout: Duration.millis(300) })
      const failed = yield* Effect.flip(api.get(R.Pods, "ns", "p")).pipe(Effect.timeout("5 seconds"))
      expect(failed).toMatchObject({ reason: "Timeout", verb: "get", target: "pods ns/p" })
      expect(fake.seen).toHaveLength(0)
      yield* Effect.promise(() => dispatcher.close())
    }))

  it.live("interrupting a request aborts it: the server sees the connection close, and the next request is answered", () =>
    Effect.gen(function* () {
      serve((req, res) => {
        if (req.url?.includes("slow")) return // never answers
        json(res, 200, pod("p", "1"))
      })
      const api = yield* KubeApi
      const fiber = yield* Effect.fork(api.get(R.Pods, "ns", "slow"))
      yield* Effect.sleep("100 millis")
      expect(fake.seen).toHaveLength(1)
      yield* Fiber.interrupt(fiber)
      yield* Effect.sleep("50 millis")
      expect(fake.closed).toBe(1)
      expect((yield* api.get(R.Pods, "ns", "p")).metadata.name).toBe("p")
    }).pipe(Effect.provide(fakeApi({ requestTimeout: Duration.seconds(30) }))))

  it.live("as the programs use it (ApiFlow over it): 429 and 5xx with Retry-After tried again after that many seconds (a create too), at most MAX_RETRY_AFTER times; without it, the error at once", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const status = (code: number, message: string) => ({ kind: "Status", status: "Failure", message, code })
      let refusals = 1
      serve((req, res, body) => {
        if (req.url?.includes("/pods/bare")) return json(res, 429, status(429, "too many requests, no hint"))
        if (req.url?.includes("/pods/always")) return res.writeHead(503, { "Retry-After": "0", "Content-Type": "application/json" }).end(JSON.stringify(status(503, "busy")))
        if (refusals-- > 0) return res.writeHead(429, { "Retry-After": "1", "Content-Type": "application/json" }).end(JSON.stringify(status(429, "too many requests")))
        return json(res, 201, { ...(JSON.parse(body || "{}") as object), metadata: { name: "p", namespace: "ns", resourceVersion: "1" } })
      })
      const started = Date.now()
      const created = yield* api.create(R.IPPools, "ns", { metadata: { name: "p" }, spec: { range: "10.0.0.0/24", allocations: {} } })
      expect(created.metadata.resourceVersion).toBe("1")
      expect(fake.seen.map((r) => r.method)).toEqual(["POST", "POST"])
      expect(Date.now() - started).toBeGreaterThanOrEqual(950)

      serve(fake.handler!)
      expect(yield* Effect.flip(api.get(R.Pods, "ns", "bare"))).toMatchObject({ reason: "TooManyRequests", status: 429 })
      expect(fake.seen).toHaveLength(1)

      serve(fake.handler!)
      expect(yield* Effect.flip(api.get(R.Pods, "ns", "always"))).toMatchObject({ reason: "Unavailable", status: 503, detail: "busy" })
      expect(fake.seen).toHaveLength(1 + MAX_RETRY_AFTER)
    }).pipe(Effect.provide(fakeFlowApi())))

  it.live("API Priority and Fairness: the flow schema and priority level a response names are logged at debug, once per pair, and again with every 429", () =>
    Effect.gen(function* () {
      const apf = (schema: string, level: string) => ({ "X-Kubernetes-PF-FlowSchema-UID": schema, "X-Kubernetes-PF-PriorityLevel-UID": level })
      const pairs: Record<string, readonly [string, string]> = { other: ["fs-2", "pl-2"], quiet: ["fs-3", "pl-3"] }
      serve((req, res) => {
        const name = req.url?.split("/").at(-1) ?? ""
        if (name === "bare") return json(res, 200, pod("bare", "1"))
        if (name === "throttled") return res.writeHead(429, { ...apf("fs-1", "pl-1"), "Content-Type": "application/json" }).end(JSON.stringify({ kind: "Status", code: 429 }))
        const [schema, level] = pairs[name] ?? ["fs-1", "pl-1"]
        return res.writeHead(200, { ...apf(schema, level), "Content-Type": "application/json" }).end(JSON.stringify(pod(name, "1")))
      })
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message, annotations }) => {
        const a = Object.fromEntries(HashMap.toEntries(annotations))
        lines.push(`${logLevel.label} ${String(message)}: ${String(a["verb"])} ${String(a["target"])} ${String(a["flowSchemaUID"])}/${String(a["priorityLevelUID"])}`)
      })
      const api = yield* KubeApi
      const at = (level: LogLevel.LogLevel) => <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Logger.withMinimumLogLevel(level), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      // At the default level: nothing, and the pair is still new when debug is on.
      yield* at(LogLevel.Info)(api.get(R.Pods, "ns", "quiet"))
      expect(lines).toEqual([])
      yield* at(LogLevel.Debug)(
        Effect.gen(function* () {
          yield* api.get(R.Pods, "ns", "a")
          yield* api.get(R.Pods, "ns", "b")
          yield* api.get(R.Pods, "ns", "other")
          yield* api.get(R.Pods, "ns", "bare")
          yield* api.get(R.Pods, "ns", "quiet")
          for (let i = 0; i < 2; i++) expect(yield* Effect.flip(api.get(R.Pods, "ns", "throttled"))).toMatchObject({ reason: "TooManyRequests", status: 429 })
        })
      )
      expect(lines).toEqual([
        "DEBUG API Priority and Fairness classifies requests: get pods ns/a fs-1/pl-1",
        "DEBUG API Priority and Fairness classifies requests: get pods ns/other fs-2/pl-2",
        "DEBUG API Priority and Fairness classifies requests: get pods ns/quiet fs-3/pl-3",
        "DEBUG API Priority and Fairness rejected a request (429): get pods ns/throttled fs-1/pl-1",
        "DEBUG API Priority and Fairness rejected a request (429): get pods ns/throttled fs-1/pl-1"
      ])
    }).pipe(Effect.provide(fakeApi())))

  it("Retry-After is read from 429 and 5xx answers, in whole seconds only", () => {
    const { retryAfterSeconds } = live()
    expect([retryAfterSeconds(429, "3"), retryAfterSeconds(503, " 0 "), retryAfterSeconds(500, "12")]).toEqual([3, 0, 12])
    expect([retryAfterSeconds(409, "3"), retryAfterSeconds(429, null), retryAfterSeconds(429, "soon"), retryAfterSeconds(429, "-1"), retryAfterSeconds(503, "Wed, 21 Oct 2026 07:28:00 GMT")]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined
    ])
  })

  const watchWith = (lines: ReadonlyArray<string>, end: "close" | "hang" = "close") =>
    serve((_req, res) => {
      res.writeHead(200, { "Content-Type": "application/json" })
      // Split mid-line on purpose: framing is by newline, not by chunk.
      const text = lines.map((l) => `${l}\n`).join("")
      res.write(text.slice(0, 17))
      setTimeout(() => {
        res.write(text.slice(17))
        if (end === "close") res.end()
      }, 20)
    })

  it.live("watch: events in order, bookmarks, and a normal end when the server closes the response", () =>
    Effect.gen(function* () {
      watchWith([
        JSON.stringify({ type: "ADDED", object: pod("a", "11") }),
        JSON.stringify({ type: "BOOKMARK", object: { kind: "Pod", apiVersion: "v1", metadata: { resourceVersion: "12" } } }),
        JSON.stringify({ type: "MODIFIED", object: pod("a", "13") }),
        JSON.stringify({ type: "DELETED", object: pod("a", "14") })
      ])
      const api = yield* KubeApi
      const events = yield* api.watch(R.Pods, "ns", { resourceVersion: "10", timeoutSeconds: 30, labelSelector: "x=y" }).pipe(Stream.runCollect)
      expect(Chunk.toArray(events).map((e) => (e.type === "BOOKMARK" ? `BOOKMARK ${e.resourceVersion}` : `${e.type} ${e.object.metadata.resourceVersion}`))).toEqual([
        "ADDED 11",
        "BOOKMARK 12",
        "MODIFIED 13",
        "DELETED 14"
      ])
      expect(new URL(fake.seen[0]!.url, fake.url).searchParams.toString()).toBe("watch=true&resourceVersion=10&allowWatchBookmarks=true&timeoutSeconds=30&labelSelector=x%3Dy")
    }).pipe(Effect.provide(fakeApi())))

  it.live("watch: an ERROR event fails the stream after the events before it (410 → Gone), as does an HTTP error", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      const seen: Array<string> = []
      watchWith([
        JSON.stringify({ type: "ADDED", object: pod("a", "11") }),
        JSON.stringify({ type: "ERROR", object: { kind: "Status", status: "Failure", message: "too old resource version: 1 (9)", reason: "Expired", code: 410 } })
      ])
      const gone = yield* api.watch(R.Pods, "ns", { resourceVersion: "1" }).pipe(
        Stream.runForEach((e) => Effect.sync(() => seen.push(e.type))),
        Effect.flip
      )
      expect(seen).toEqual(["ADDED"])
      expect(gone).toMatchObject({ reason: "Gone", status: 410, verb: "watch", target: "pods", detail: "too old resource version: 1 (9)" })
      watchWith([JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 500, message: "internal error" } })])
      expect(yield* Effect.flip(Stream.runDrain(api.watch(R.Pods, "ns", { resourceVersion: "1" })))).toMatchObject({ reason: "Unavailable", status: 500 })
      serve((_req, res) => json(res, 403, { kind: "Status", code: 403, message: "forbidden: no watch for you" }))
      expect(yield* Effect.flip(Stream.runDrain(api.watch(R.Pods, undefined, { resourceVersion: "1" })))).toMatchObject({ reason: "Forbidden", detail: "forbidden: no watch for you" })
    }).pipe(Effect.provide(fakeApi())))

  it.live("watch: silence past the idle limit ends the stream; events that keep coming within it do not", () =>
    Effect.gen(function* () {
      const line = (name: string) => new TextEncoder().encode(`${JSON.stringify({ type: "ADDED", object: pod(name, "1") })}\n`)
      // Five events 60 ms apart under a 150 ms limit, then silence: all five, then the end.
      const steady = new ReadableStream<Uint8Array>({
        start: (c) => ["a", "b", "c", "d", "e"].forEach((n, i) => setTimeout(() => c.enqueue(line(n)), i * 60))
      })
      const started = Date.now()
      const got = yield* Stream.runCollect(live().watchEvents(steady.getReader(), "pods", Duration.millis(150))).pipe(Effect.timeout("5 seconds"))
      expect(Chunk.toArray(got).map((e) => (e.type === "ADDED" ? e.object.metadata.name : e.type))).toEqual(["a", "b", "c", "d", "e"])
      const took = Date.now() - started
      expect(took).toBeGreaterThanOrEqual(240 + 150 - 20)
      expect(took).toBeLessThan(2_000)
    }))

  it.live("watch: interrupting the stream aborts the request; a dropped connection ends it", () =>
    Effect.gen(function* () {
      const api = yield* KubeApi
      watchWith([JSON.stringify({ type: "ADDED", object: pod("a", "11") })], "hang")
      const first = yield* api.watch(R.Pods, "ns", { resourceVersion: "1" }).pipe(Stream.take(1), Stream.runCollect)
      expect(Chunk.size(first)).toBe(1)
      yield* Effect.sleep("50 millis")
      expect(fake.closed).toBe(1)
      serve((_req, res) => {
        res.writeHead(200, { "Content-Type": "application/json" })
        res.write(`${JSON.stringify({ type: "ADDED", object: pod("b", "12") })}\n{"type":"MODIF`)
        setTimeout(() => res.socket?.destroy(), 20)
      })
      const dropped = yield* api.watch(R.Pods, "ns", { resourceVersion: "1" }).pipe(Stream.runCollect, Effect.timeout("5 seconds"))
      expect(Chunk.toArray(dropped).map((e) => e.type)).toEqual(["ADDED"])
    }).pipe(Effect.provide(fakeApi())))
})
