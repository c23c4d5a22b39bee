/**
 * The Dockerfile, read statically (no docker here): its entrypoint is what `npm run build` emits,
 * its default command parses, it runs as the uid the Deployment demands, on the Node major the
 * project pins, and .dockerignore lets in everything the build stages copy.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { parseCli } from "../../src/programs/cli.ts"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))
const read = (p: string) => readFileSync(join(ROOT, p), "utf8")

const dockerfile = read("Dockerfile")
/** Instructions with continuation lines joined, comments dropped. */
const instructions = dockerfile
  .replace(/\\\n/g, " ")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l !== "" && !l.startsWith("#"))
const stages = instructions.reduce<Array<Array<string>>>((acc, l) => {
  if (/^FROM\s/i.test(l)) acc.push([l])
  else acc.at(-1)?.push(l)
  return acc
}, [])
const runtime = stages.at(-1)!
const jsonArg = (stage: ReadonlyArray<string>, op: string): Array<string> => {
  const line = stage.filter((l) => l.toUpperCase().startsWith(`${op} `)).at(-1)
  if (line === undefined) throw new Error(`no ${op} in the runtime stage`)
  return JSON.parse(line.slice(op.length + 1)) as Array<string>
}

describe("Dockerfile", () => {
  it("runs dist/main.js, the bundle `npm run build` makes of src/programs/main.ts", async () => {
    const entrypoint = jsonArg(runtime, "ENTRYPOINT")
    expect(entrypoint[0]).toMatch(/(^|\/)node$/)
    // node, its own flags, then the script.
    const scripts = entrypoint.slice(1).filter((a) => !a.startsWith("-"))
    expect(scripts).toHaveLength(1)
    const script = scripts[0]!
    expect(entrypoint.at(-1)).toBe(script)
    expect(script).toBe("dist/main.js")
    const pkg = JSON.parse(read("package.json")) as { bin: Record<string, string>; scripts: Record<string, string> }
    expect(Object.values(pkg.bin)).toContain(script)
    expect(pkg.scripts["build"]).toBe("node scripts/build.ts")
    const { ENTRY } = await import("../../scripts/build.ts")
    expect(ENTRY).toBe(join(ROOT, "src/programs/main.ts"))
    expect(existsSync(ENTRY)).toBe(true)
    // The runtime stage copies the bundle only: everything it needs is inside.
    expect(runtime.some((l) => /node_modules/.test(l))).toBe(false)
  })

  it("sets glibc's allocator to return freed memory (two arenas, fixed mmap and trim thresholds)", () => {
    const env = runtime.filter((l) => /^ENV\s/i.test(l)).join(" ")
    expect(env).toContain("MALLOC_ARENA_MAX=2")
    expect(env).toContain("MALLOC_MMAP_THRESHOLD_=131072")
    expect(env).toContain("MALLOC_TRIM_THRESHOLD_=131072")
  })

  it("defaults to the `run` command, which the CLI accepts", () => {
    const cmd = jsonArg(runtime, "CMD")
    expect(cmd).toEqual(["run"])
    expect(parseCli(cmd).command).toBe("run")
  })

  it("runs as the non-root uid the Deployment requires, in production mode, with package.json (ESM) beside dist/", () => {
    const user = runtime.filter((l) => /^USER\s/i.test(l)).at(-1)
    expect(user).toBe("USER 65532:65532")
    const deployment = parseAllDocuments(read("deploy/deployment.yaml"))
      .map((d) => d.toJS() as { kind?: string; spec?: { template: { spec: { securityContext: { runAsUser: number } } } } })
      .find((o) => o.kind === "Deployment")!
    expect(deployment.spec!.template.spec.securityContext.runAsUser).toBe(65532)
    expect(runtime).toContain("ENV NODE_ENV=production")
    expect(runtime.some((l) => /^COPY\s+package\.json\s/.test(l))).toBe(true)
  })

  it("builds and runs on the Node major that package.json pins", () => {
    const pkg = JSON.parse(read("package.json")) as { devDependencies: Record<string, string> }
    const major = pkg.devDependencies["node"]!.split(".")[0]!
    const bases = stages.map((s) => s[0]!.split(/\s+/)[1]!)
    expect(bases.length).toBeGreaterThanOrEqual(2)
    for (const base of bases) expect(base, base).toMatch(new RegExp(`node(js)?:?${major}\\b|nodejs${major}-`))
  })

  it(".dockerignore lets in every path the build stages copy from the context", () => {
    const allowed = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1).replace(/\/$/, ""))
    const sources = instructions
      .filter((l) => /^COPY\s/i.test(l) && !/--from=/.test(l))
      .flatMap((l) => l.split(/\s+/).slice(1, -1).filter((a) => !a.startsWith("--")))
    expect(sources.length).toBeGreaterThan(0)
    for (const s of sources) expect(allowed, s).toContain(s.replace(/\/$/, ""))
  })
})
