/** Watch framing: newline-delimited JSON events from a response body, as a Stream. */
import { Chunk, Duration, Effect, Option, Stream } from "effect"
import { type KubeObject, type WatchEvent, malformed } from "../KubeApi.ts"
import { KubeError } from "../KubeError.ts"
import { isRecord } from "../../domain/json.ts"
import { MAX_DETAIL, errorFromResponse } from "./transport.ts"

export const isKubeObject = (u: unknown): u is KubeObject => isRecord(u) && isRecord(u["metadata"])

type Pull = Effect.Effect<Chunk.Chunk<WatchEvent>, Option.Option<KubeError>>

/**
 * Newline-delimited watch events. The stream ends when the server closes the response, when the
 * connection drops mid-stream or stays silent past `idle` (as client-go's StreamWatcher does: the
 * consumer resumes from its last version); an ERROR event fails it (410 → "Gone").
 */
export const watchEvents = (reader: ReadableStreamDefaultReader<Uint8Array>, target: string, idle: Duration.Duration): Stream.Stream<WatchEvent, KubeError> => {
  const decoder = new TextDecoder()
  let buffer = ""
  let pending: KubeError | undefined
  const end: Pull = Effect.fail(Option.none())
  const parse = (line: string): WatchEvent | KubeError | undefined => {
    let e: { type?: unknown; object?: unknown }
    try {
      e = JSON.parse(line) as typeof e
    } catch {
      return malformed("watch", target, `event is not JSON: ${line.slice(0, 200)}`)
    }
    const o = e.object
    switch (e.type) {
      case "ADDED":
      case "MODIFIED":
      case "DELETED":
        return isKubeObject(o) ? { type: e.type, object: o } : malformed("watch", target, `${e.type} event without an object`)
      case "BOOKMARK": {
        const rv = isKubeObject(o) ? o.metadata.resourceVersion : undefined
        return typeof rv === "string" ? { type: "BOOKMARK", resourceVersion: rv } : undefined
      }
      case "ERROR": {
        // A Status, read as the body of a non-2xx answer.
        const text = JSON.stringify(o ?? null)
        if (isRecord(o) && typeof o["code"] === "number") return errorFromResponse("watch", target, o["code"], text)
        return new KubeError({ reason: "Unknown", verb: "watch", target, detail: text.slice(0, MAX_DETAIL) })
      }
      default:
        return undefined
    }
  }
  // One timer for the whole watch, set again before each read: silence past `idle` cancels the
  // reader, which ends the pending read (no timer race per chunk: watches are a hot path).
  let silence: ReturnType<typeof setTimeout> | undefined
  const listen = () => {
    if (silence === undefined) {
      silence = setTimeout(() => void reader.cancel().catch(() => undefined), Duration.toMillis(idle))
      silence.unref()
    } else silence.refresh()
  }
  const quiet = Effect.sync(() => clearTimeout(silence))
  const pull: Pull = Effect.suspend(() => {
    if (pending !== undefined) return Effect.fail(Option.some(pending))
    listen()
    return Effect.tryPromise(() => reader.read()).pipe(
      Effect.matchEffect({
        onFailure: () => end, // dropped connection, or silence: a normal end
        onSuccess: ({ done, value }): Pull => {
          if (done) return end
          buffer += decoder.decode(value, { stream: true })
          const lines = buffer.split("\n")
          buffer = lines.pop()!
          const events: Array<WatchEvent> = []
          for (const line of lines) {
            if (line.trim() === "") continue
            const parsed = parse(line)
            if (parsed instanceof KubeError) {
              pending = parsed
              break
            }
            if (parsed !== undefined) events.push(parsed)
          }
          if (events.length > 0) return Effect.succeed(Chunk.unsafeFromArray(events))
          return pull
        }
      })
    )
  })
  return Stream.repeatEffectChunkOption(pull).pipe(Stream.ensuring(quiet))
}
