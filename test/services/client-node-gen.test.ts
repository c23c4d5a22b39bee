/**
 * The image's bundle keeps client-node's generated API out (scripts/build.ts hands its KubeConfig
 * src/services/live/client-node-gen.ts instead): that module exports exactly what config.js imports
 * from the generated API, so a client-node upgrade that imports more fails here, not at start.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const ROOT = path.resolve(import.meta.dirname, "../..")
const configJs = path.join(ROOT, "node_modules/@kubernetes/client-node/dist/config.js")

describe("client-node's KubeConfig without its generated API", () => {
  it("the slim module exports exactly the names config.js imports from ./gen/index.js", async () => {
    const text = fs.readFileSync(configJs, "utf8")
    const m = /import\s*\{([^}]*)\}\s*from\s*'\.\/gen\/index\.js'/.exec(text)
    expect(m).not.toBeNull()
    const wanted = m![1]!.split(",").map((s) => s.trim()).filter((s) => s !== "").sort()
    const slim = await import("../../src/services/live/client-node-gen.ts")
    expect(Object.keys(slim).sort()).toEqual(wanted)
  })
})
