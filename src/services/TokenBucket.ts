/**
 * client-go's token bucket (golang.org/x/time/rate), the one bucket behind the client-side API
 * limit and the work queue's overall requeue limit: `burst` at once, then `qps` per second. Each
 * caller reserves a token (the balance may go below zero) and waits exactly until its token
 * exists, so the rate holds however late timers fire. (effect's RateLimiter refills one token per
 * timer tick and falls behind the rate on a busy event loop; BENCHMARKS.md's Decisions.)
 */
import { Clock, Duration, Effect, type RateLimiter } from "effect"

export interface TokenBucket {
  /** Reserves a token at `nowMillis`; how long to wait for it (0 when one is there), and a ticket to cancel it. */
  readonly reserve: (nowMillis: number) => { readonly waitMillis: number; readonly ticket: number }
  /**
   * Gives back an unused reservation, but only when no later one was made (as x/time/rate's
   * Cancel): a later reservation already counted on its slot, and giving it back then would let
   * one more through than the limit allows.
   */
  readonly cancel: (ticket: number) => void
}

/** A full bucket at `startMillis`; qps > 0, burst ≥ 1. */
export const makeTokenBucket = (qps: number, burst: number, startMillis: number): TokenBucket => {
  const capacity = Math.max(1, Math.floor(burst))
  let tokens = capacity
  let last = startMillis
  let reservations = 0
  return {
    reserve: (now) => {
      tokens = Math.min(capacity, tokens + (Math.max(0, now - last) * qps) / 1000)
      last = Math.max(last, now)
      tokens -= 1
      const ticket = ++reservations
      return { waitMillis: tokens >= 0 ? 0 : (-tokens * 1000) / qps, ticket }
    },
    cancel: (ticket) => {
      if (ticket !== reservations) return
      tokens += 1
      reservations--
    }
  }
}

const nowMillis = Effect.map(Clock.currentTimeNanos, (n) => Number(n / 1000n) / 1000)

/** The bucket as a RateLimiter for effects; qps ≤ 0 (or not finite) turns limiting off. */
export const rateLimiter = (qps: number, burst: number): Effect.Effect<RateLimiter.RateLimiter> => {
  if (!(qps > 0) || !Number.isFinite(qps)) return Effect.succeed((effect) => effect)
  return Effect.map(nowMillis, (start) => {
    const bucket = makeTokenBucket(qps, burst, start)
    const take = Effect.flatMap(nowMillis, (now) => {
      const { waitMillis, ticket } = bucket.reserve(now)
      if (waitMillis === 0) return Effect.void
      return Effect.sleep(Duration.millis(waitMillis)).pipe(Effect.onInterrupt(() => Effect.sync(() => bucket.cancel(ticket))))
    })
    return <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.zipRight(take, effect)
  })
}
