/**
 * The Dockerfile, read statically (no docker here): its entrypoint is what `npm run build` emits,
 * its default command parses, it runs as the uid the Deployment demands, on the Node major the
 * project pins, and .dockerignore lets in everything the build stages copy.
 */
import { existsSync, readFileSync } from "node:fs"
import { join, posix } from "node:path"
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

  it("the in-cluster commands of docs/install.md and the chart's NOTES run the image's node on the bundle under its WORKDIR, with arguments the CLI parses", () => {
    const entrypoint = jsonArg(runtime, "ENTRYPOINT")
    const workdir = runtime.filter((l) => /^WORKDIR\s/i.test(l)).at(-1)!.split(/\s+/)[1]!
    const bundle = posix.join(workdir, entrypoint.at(-1)!)
    expect(`${entrypoint[0]} ${bundle}`).toBe("/nodejs/bin/node /app/dist/main.js")
    for (const file of ["docs/install.md", "charts/whereabouts-controller/templates/NOTES.txt"]) {
      const text = read(file)
      // Every mention of the bundle is its path in the image: exec starts in WORKDIR, but a path that
      // does not depend on it is what an operator can copy anywhere.
      for (const m of text.matchAll(/[^\s`'"]*main\.js/g)) expect(m[0], file).toBe(bundle)
      const commands = [...text.matchAll(/ -- (\S+) (\S+) ([^\n<>|`]*)/g)].filter((m) => m[2] === bundle)
      expect(commands.map((m) => m[3]!.trim().split(/\s+/)[0]), file).toEqual(expect.arrayContaining(["audit", "release"]))
      for (const [, node, , args] of commands) {
        expect(node, file).toBe(entrypoint[0])
        expect(() => parseCli(args!.trim().split(/\s+/)), `${file}: ${args}`).not.toThrow()
      }
    }
  })

  it("deploy/operator/audit-job.yaml runs the image's ENTRYPOINT with `audit -o json`, as the controller's ServiceAccount and the image's uid", () => {
    const job = parseAllDocuments(read("deploy/operator/audit-job.yaml")).map((d) => d.toJS() as Record<string, any>).find((o) => o["kind"] === "Job")!
    const pod = job["spec"]["template"]["spec"]
    const [container] = pod["containers"]
    // No `command`: the ENTRYPOINT (node, its heap flags, the bundle) runs the arguments.
    expect(container["command"]).toBeUndefined()
    const cli = parseCli(container["args"])
    expect(cli.command).toBe("audit")
    expect(cli.values.get("OUTPUT")).toBe("json")
    const deployment = parseAllDocuments(read("deploy/deployment.yaml")).map((d) => d.toJS() as Record<string, any>).find((o) => o["kind"] === "Deployment")!
    expect(pod["serviceAccountName"]).toBe(deployment["spec"]["template"]["spec"]["serviceAccountName"])
    expect(container["image"]).toBe(deployment["spec"]["template"]["spec"]["containers"][0]["image"])
    expect(`USER ${pod["securityContext"]["runAsUser"]}:${pod["securityContext"]["runAsGroup"]}`).toBe(runtime.filter((l) => /^USER\s/i.test(l)).at(-1))
    expect(pod["restartPolicy"]).toBe("Never")
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
