/**
 * The API server's reachability said once per change: a run of failed attempts is one "cannot
 * reach" line, the first answer after it one "reached" line; answers and failures with a status
 * (the server answered) change nothing. Driven by TestClock, the lines captured by a test logger.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, HashMap, Logger, TestClock } from "effect"
import { KubeError, isUnreachable } from "../../src/services/KubeError.ts"
import { makeReachability, outageLength, timeOfDay, unreachableReason } from "../../src/services/live/reachability.ts"

const SERVER = "https://127.0.0.1:6443"

const failure = (detail: string, reason: "Unavailable" | "Timeout" = "Unavailable", status?: number) =>
  new KubeError({ reason, verb: "list", target: "pods", detail, ...(status === undefined ? {} : { status }) })
const refused = failure("ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443")
const timedOut = failure("no answer within 30s", "Timeout")

/** The lines logged by `body`: level, message and annotations. */
const logged = <A, E>(body: (lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }>) => Effect.Effect<A, E>) =>
  Effect.gen(function* () {
    const lines: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
    const logger = Logger.make(({ logLevel, message, annotations }) => {
      lines.push({ level: logLevel.label, message: String(message), annotations: Object.fromEntries(HashMap.toEntries(annotations)) })
    })
    return yield* body(lines).pipe(Effect.provide(Logger.add(logger)))
  })

describe("reachability of the API server", () => {
  it.effect("failures → one 'cannot reach' line; an answer → one 'reached again' line; failing again → one more", () =>
    logged((lines) =>
      Effect.gen(function* () {
        const reach = makeReachability(SERVER)
        yield* TestClock.adjust("1 hour")
        yield* reach.answered
        expect(lines).toEqual([])
        const down = 3_600_000
        // Seven informers and the lease, twice over: one line.
        for (let i = 0; i < 16; i++) {
          yield* reach.failed(refused).pipe(Effect.annotateLogs({ resource: `r${i}` }))
          yield* TestClock.adjust("1 second")
        }
        expect(lines).toEqual([
          // The fiber that failed first lends it none of its annotations.
          { level: "WARN", message: `cannot reach ${SERVER} since ${timeOfDay(down)}: connection refused`, annotations: { server: SERVER, error: refused.message } }
        ])
        yield* TestClock.adjust("9 seconds")
        for (let i = 0; i < 5; i++) yield* reach.answered
        expect(lines.slice(1)).toEqual([{ level: "INFO", message: `reached ${SERVER} again after 25 s`, annotations: { server: SERVER } }])
        yield* reach.failed(timedOut)
        yield* reach.failed(refused)
        expect(lines.slice(2).map((l) => `${l.level} ${l.message}`)).toEqual([`WARN cannot reach ${SERVER} since ${timeOfDay(down + 25_000)}: no answer within 30s`])
      })
    ))

  it.effect("an answer with any status is reached; failures with a status (a 503, a 403) are not 'cannot reach'", () =>
    logged((lines) =>
      Effect.gen(function* () {
        const reach = makeReachability(SERVER)
        yield* reach.failed(failure("service unavailable", "Unavailable", 503))
        yield* reach.failed(new KubeError({ reason: "Forbidden", verb: "list", target: "pods", status: 403, detail: "forbidden" }))
        expect(lines).toEqual([])
        // Down from the start: "reached", not "again".
        yield* reach.failed(refused)
        yield* TestClock.adjust("3 minutes")
        yield* TestClock.adjust("5 seconds")
        yield* reach.answered
        expect(lines.map((l) => l.message)).toEqual([`cannot reach ${SERVER} since ${timeOfDay(0)}: connection refused`, `reached ${SERVER} after 3 min 5 s`])
      })
    ))

  it("only failures without an HTTP answer count", () => {
    expect(isUnreachable(refused)).toBe(true)
    expect(isUnreachable(timedOut)).toBe(true)
    expect(isUnreachable(failure("busy", "Unavailable", 503))).toBe(false)
    expect(isUnreachable(failure("gateway timeout", "Timeout", 504))).toBe(false)
    expect(isUnreachable(new KubeError({ reason: "Unauthorized", verb: "get", target: "pods", detail: "credentials: exec plugin failed" }))).toBe(false)
  })

  it.each([
    ["ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:6443", "connection refused"],
    ["ENOTFOUND: getaddrinfo ENOTFOUND api.example", "no such host"],
    ["EAI_AGAIN: getaddrinfo EAI_AGAIN api.example", "DNS lookup failed"],
    ["UND_ERR_CONNECT_TIMEOUT: fetch failed: Connect Timeout Error", "connection timed out"],
    ["ECONNRESET: read ECONNRESET", "connection reset"],
    ["CERT_HAS_EXPIRED: certificate has expired", "TLS handshake failed: certificate has expired"],
    ["DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate", "TLS handshake failed: self-signed certificate"],
    ["ERR_TLS_CERT_ALTNAME_INVALID: Hostname/IP does not match certificate's altnames", "TLS handshake failed: Hostname/IP does not match certificate's altnames"],
    ["no answer within 30s", "no answer within 30s"],
    ["EWHATEVER: something new", "EWHATEVER: something new"]
  ])("%s reads as %s", (detail, reason) => {
    expect(unreachableReason(failure(detail))).toBe(reason)
  })

  it("an outage's length is rounded to what a reader needs", () => {
    expect([outageLength(400), outageLength(25_400), outageLength(119_000), outageLength(185_000), outageLength(7_440_000)]).toEqual(["0 s", "25 s", "119 s", "3 min 5 s", "2 h 4 min"])
    expect(timeOfDay(new Date(2026, 0, 1, 9, 5, 7).getTime())).toBe("09:05:07")
  })
})
