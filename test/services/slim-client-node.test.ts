/**
 * The entry point's import hook (src/services/live/slim-client-node.ts): client-node's KubeConfig
 * still works, its generated API is not loaded, and the slim module exports exactly what
 * config.js imports from it (so a client-node upgrade that imports more fails here, not at start).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = path.resolve(import.meta.dirname, "../..")
const configJs = path.join(ROOT, "node_modules/@kubernetes/client-node/dist/config.js")

/** Runs a module in a fresh Node (the one running the tests: Node 24) and parses its JSON output. */
const child = (code: string): Record<string, unknown> =>
  JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", code], { cwd: ROOT, encoding: "utf8" })) as Record<string, unknown>

const probe = (slim: boolean) => `
import { registerHooks } from "node:module"
${slim ? `const { slimClientNode } = await import(${JSON.stringify(path.join(ROOT, "src/services/live/slim-client-node.ts"))}); slimClientNode()` : ""}
// Registered last, so it runs first and sees every resolution, the slim hook's answers included.
const seen = []
registerHooks({ resolve: (s, c, next) => { const r = next(s, c); seen.push(r.url); return r } })
const { resolveKubeConfig, sourcesFrom } = await import(${JSON.stringify(path.join(ROOT, "src/services/live/kubeconfig.ts"))})
await import(${JSON.stringify(path.join(ROOT, "src/services/KubeApiLive.ts"))})
const { Effect } = await import("effect")
const file = ${JSON.stringify(path.join(ROOT, "test/services/fixtures/slim-kubeconfig.yaml"))}
const resolved = await Effect.runPromise(Effect.flatMap(sourcesFrom(file), resolveKubeConfig))
const { RequestContext } = await import("@kubernetes/client-node/dist/gen/http/http.js")
const ctx = new RequestContext("https://127.0.0.1:6443/api", "GET")
await resolved.kc.applySecurityAuthentication(ctx)
console.log(JSON.stringify({
  server: resolved.kc.getCurrentCluster()?.server,
  authorization: ctx.getHeaders()["Authorization"],
  generatedApiLoaded: seen.some((u) => /client-node\\/dist\\/gen\\/(index|models\\/all)\\.js$/.test(u)),
  slimLoaded: seen.some((u) => /client-node-gen\\.ts$/.test(u))
}))
`

describe("slim client-node imports", () => {
  it("with the hook: KubeConfig loads and signs requests, and the generated API is never loaded", () => {
    expect(child(probe(true))).toEqual({ server: "https://127.0.0.1:6443", authorization: "Bearer slim-token", generatedApiLoaded: false, slimLoaded: true })
  })

  it("without it (tests, benchmarks) the same works, loading the whole generated API", () => {
    expect(child(probe(false))).toEqual({ server: "https://127.0.0.1:6443", authorization: "Bearer slim-token", generatedApiLoaded: true, slimLoaded: false })
  })

  it("the slim module exports exactly the names config.js imports from ./gen/index.js", async () => {
    const text = fs.readFileSync(configJs, "utf8")
    const m = /import\s*\{([^}]*)\}\s*from\s*'\.\/gen\/index\.js'/.exec(text)
    expect(m).not.toBeNull()
    const wanted = m![1]!.split(",").map((s) => s.trim()).filter((s) => s !== "").sort()
    const slim = await import("../../src/services/live/client-node-gen.ts")
    expect(Object.keys(slim).sort()).toEqual(wanted)
  })
})
