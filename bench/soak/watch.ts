/**
 * The checker's own informer, apart from src/services/Informer.ts so a bug there cannot blind the
 * check: list, then watch from its version with bookmarks, resuming from the last version seen; on
 * 410 list again and report what vanished as deleted; an unreachable API server is tried every second.
 */
import * as https from "node:https"
import { setTimeout as sleep } from "node:timers/promises"
import type { Credentials } from "../../test/live/support/rest.ts"

type WatchKind = "ADDED" | "MODIFIED" | "DELETED"

/** What the watch reports: an object's new state (its last one for DELETED); `relist` when it was learnt from a list, not a watch event. */
export interface Change {
  readonly type: WatchKind
  readonly key: string
  readonly object: Record<string, unknown>
  readonly at: number
  readonly relist: boolean
}

interface Meta {
  readonly name?: string
  readonly namespace?: string
  readonly resourceVersion?: string
}

const metaOf = (o: Record<string, unknown>): Meta => (o["metadata"] ?? {}) as Meta
const keyOf = (o: Record<string, unknown>): string => {
  const m = metaOf(o)
  return m.namespace === undefined ? String(m.name) : `${m.namespace}/${m.name}`
}

const request = (creds: Credentials, path: string, signal: AbortSignal) =>
  new Promise<import("node:http").IncomingMessage>((resolve, reject) => {
    const req = https.request(`${creds.server}${path}`, { ca: creds.caPem, headers: { Authorization: `Bearer ${creds.token}`, Accept: "application/json" }, signal }, resolve)
    req.on("error", reject)
    req.end()
  })

const readAll = async (res: import("node:http").IncomingMessage): Promise<string> => {
  let text = ""
  res.setEncoding("utf8")
  for await (const chunk of res) text += chunk as string
  return text
}

/**
 * Watches the collection at `collection` (an API path, query allowed), reporting every change
 * to `onChange` in order. Runs until `stop`.
 */
export const startWatcher = (creds: Credentials, collection: string, onChange: (c: Change) => void) => {
  const controller = new AbortController()
  const cache = new Map<string, Record<string, unknown>>()
  const sep = collection.includes("?") ? "&" : "?"
  /** Resolves after the first list has been reported. */
  const synced = Promise.withResolvers<void>()

  const relist = async (): Promise<string> => {
    const res = await request(creds, collection, controller.signal)
    const body = await readAll(res)
    if (res.statusCode !== 200) throw new Error(`list ${collection}: HTTP ${res.statusCode}: ${body.slice(0, 200)}`)
    const list = JSON.parse(body) as { metadata: Meta; items: Array<Record<string, unknown>> }
    const at = Date.now()
    const seen = new Set<string>()
    for (const item of list.items) {
      const key = keyOf(item)
      seen.add(key)
      const before = cache.get(key)
      cache.set(key, item)
      if (before === undefined) onChange({ type: "ADDED", key, object: item, at, relist: true })
      else if (metaOf(before).resourceVersion !== metaOf(item).resourceVersion) onChange({ type: "MODIFIED", key, object: item, at, relist: true })
    }
    for (const [key, last] of cache) {
      if (seen.has(key)) continue
      cache.delete(key)
      onChange({ type: "DELETED", key, object: last, at, relist: true })
    }
    synced.resolve()
    return list.metadata.resourceVersion ?? ""
  }

  /** One watch from `rv`; resolves with the last version seen, or "gone" when it must relist. */
  const watchOnce = async (rv: string): Promise<string | "gone"> => {
    const res = await request(creds, `${collection}${sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${rv}`, controller.signal)
    if (res.statusCode === 410) return "gone"
    if (res.statusCode !== 200) throw new Error(`watch ${collection}: HTTP ${res.statusCode}: ${(await readAll(res)).slice(0, 200)}`)
    let buffer = ""
    let last = rv
    res.setEncoding("utf8")
    for await (const chunk of res) {
      buffer += chunk as string
      let nl: number
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        if (line.trim() === "") continue
        const event = JSON.parse(line) as { type: string; object: Record<string, unknown> }
        if (event.type === "ERROR") return (event.object["code"] as number | undefined) === 410 ? "gone" : last
        last = metaOf(event.object).resourceVersion ?? last
        if (event.type === "BOOKMARK") continue
        const key = keyOf(event.object)
        if (event.type === "DELETED") cache.delete(key)
        else cache.set(key, event.object)
        onChange({ type: event.type as WatchKind, key, object: event.object, at: Date.now(), relist: false })
      }
    }
    return last
  }

  const run = async () => {
    while (!controller.signal.aborted) {
      try {
        let rv = await relist()
        for (;;) {
          const next = await watchOnce(rv)
          if (next === "gone") break
          rv = next
        }
      } catch {
        if (controller.signal.aborted) return
        await sleep(1_000)
      }
    }
  }
  void run()
  return { synced: synced.promise, stop: () => controller.abort() }
}
