/**
 * The client-side rate limiter alone: how many requests per second it lets through against
 * its configured QPS, on an idle and on a busy event loop.
 *
 *   node bench/children/limiter.ts <ours|effect> <qps> <burst> <requests> <busyMs per request>
 *
 * ours: makeRateLimiter (src/services/live/transport.ts); effect: effect's RateLimiter
 * token-bucket with the same parameters, which makeRateLimiter wrapped before.
 */
import { Duration, Effect, RateLimiter } from "effect"
import { makeRateLimiter } from "../../src/services/KubeApiLive.ts"

const [impl, qps, burst, n, busy] = [process.argv[2] ?? "ours", Number(process.argv[3] ?? 500), Number(process.argv[4] ?? 1000), Number(process.argv[5] ?? 3000), Number(process.argv[6] ?? 0)]
const spin = (ms: number) => {
  const end = performance.now() + ms
  while (performance.now() < end);
}
const program = Effect.scoped(
  Effect.gen(function* () {
    const limit =
      impl === "effect"
        ? yield* RateLimiter.make({ limit: burst, interval: Duration.millis((burst / qps) * 1000), algorithm: "token-bucket" })
        : yield* makeRateLimiter(qps, burst)
    const t = performance.now()
    yield* Effect.forEach(Array.from({ length: n }), () => limit(Effect.sync(() => spin(busy))), { concurrency: 64, discard: true })
    const seconds = (performance.now() - t) / 1000
    return { impl, qps, burst, n, busyMs: busy, seconds, ideal: Math.max(0, n - burst) / qps, rate: (n - burst) / seconds }
  })
)
Effect.runPromise(program).then((r) => process.stdout.write(`${JSON.stringify(r)}\n`))
