/**
 * Heap cost of the pod cache, in a process of its own (run with --expose-gc):
 *
 *   node --expose-gc bench/children/heap.ts <projection|full> <pods>
 *
 * The informer (src/services/Informer.ts) lists `pods` realistic pods from a stub API that decodes
 * each one from JSON text, as the live client does, and caches either the controller's projection
 * (`projectPod`, as Caches does) or the whole object (the baseline). Prints one JSON line: the
 * heap used after a full GC with the synced cache, minus the same before the informer started.
 */
import { Effect, Stream } from "effect"
import { KubeApi, type KubeApiShape, type KubeObject } from "../../src/services/KubeApi.ts"
import { networkStatusFor, podInformer, realisticPod } from "../lib/pods.ts"

const mode = process.argv[2] === "full" ? "full" : "projection"
const total = Number(process.argv[3] ?? 10_000)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) throw new Error("run with --expose-gc")

/** Pod i as the API server would send it: 1-2 Multus networks, JSON text decoded on arrival. */
const podText = (i: number): string => {
  const nets = i % 3 === 0 ? [0, 1] : [i % 10]
  const attachments = nets.map((k, j) => ({ network: `shop/net-${k}`, ifname: `net${j + 1}`, ips: [`10.${k}.${(i >> 8) & 255}.${i & 255}`] }))
  return JSON.stringify(
    realisticPod("shop", `web-7d9f8c6b5-${i.toString(36).padStart(5, "0")}`, i, {
      networks: attachments.map((a) => `${a.network}@${a.ifname}`).join(","),
      networkStatus: networkStatusFor(i, attachments)
    })
  )
}

const stub: KubeApiShape = {
  get: () => Effect.dieMessage("not used"),
  list: (_r, _ns, o = {}) =>
    Effect.sync(() => {
      const start = o.continue === undefined || o.continue === "" ? 0 : Number(o.continue)
      const end = Math.min(total, start + (o.limit ?? total))
      const items: Array<KubeObject> = []
      for (let i = start; i < end; i++) items.push(JSON.parse(podText(i)) as KubeObject)
      return { items, resourceVersion: "1", continue: end < total ? String(end) : undefined }
    }),
  create: () => Effect.dieMessage("not used"),
  replace: () => Effect.dieMessage("not used"),
  patch: () => Effect.dieMessage("not used"),
  delete: () => Effect.dieMessage("not used"),
  watch: () => Stream.never
}

const settle = () => {
  for (let i = 0; i < 4; i++) gc()
}

const program = Effect.scoped(
  Effect.gen(function* () {
    const jsonBytes = podText(1).length
    settle()
    const before = process.memoryUsage().heapUsed
    const started = performance.now()
    const informer = yield* podInformer(mode === "projection")
    yield* informer.awaitSynced
    const syncMs = performance.now() - started
    settle()
    const after = process.memoryUsage().heapUsed
    const cached = informer.byKey.size
    process.stdout.write(`${JSON.stringify({ mode, pods: total, cached, jsonBytes, before, after, perPod: (after - before) / cached, syncMs })}\n`)
  })
)

Effect.runPromise(program.pipe(Effect.provideService(KubeApi, stub))).catch((e: unknown) => {
  process.stderr.write(`${String(e)}\n`)
  process.exit(1)
})
