/**
 * The shape of the code, checked rather than hoped for: the layering (domain pure, services
 * below programs, the simulation outside production), the image's bundle without the simulation,
 * one module that writes releases, short functions in src, and no pointer from the manifests or
 * docs to a source file that is gone.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"
import { describe, expect, it } from "vitest"
import { bundleWithInputs } from "../scripts/build.ts"

const ROOT = fileURLToPath(new URL("..", import.meta.url))

const sources = (dir: string, name: RegExp = /\.ts$/): Array<string> =>
  fs
    .readdirSync(path.join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => name.test(f))
    .map((f) => path.join(dir, f))

const parse = (file: string): ts.SourceFile =>
  ts.createSourceFile(file, fs.readFileSync(path.join(ROOT, file), "utf8"), ts.ScriptTarget.ES2022, true)

/** Relative module specifiers a file imports statically (import/export ... from), resolved to repo paths. */
const staticImports = (file: string): Array<string> => {
  const out: Array<string> = []
  for (const node of parse(file).statements) {
    const spec = (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined ? node.moduleSpecifier : undefined
    if (spec === undefined || !ts.isStringLiteral(spec) || !spec.text.startsWith(".")) continue
    if (ts.isImportDeclaration(node) && node.importClause?.isTypeOnly === true) continue
    out.push(path.normalize(path.join(path.dirname(file), spec.text)))
  }
  return out
}

const layerOf = (file: string): string => file.split(path.sep).slice(0, 2).join("/")

describe("layering", () => {
  const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["src/domain", ["src/domain"]],
    ["src/services", ["src/domain", "src/services"]],
    ["src/programs", ["src/domain", "src/services", "src/programs"]]
  ]
  it.each(cases)("%s imports only from %j (statically)", (dir, allowed) => {
    const offending = sources(dir).flatMap((f) => staticImports(f).filter((i) => !allowed.includes(layerOf(i))).map((i) => `${f} -> ${i}`))
    expect(offending).toEqual([])
  })
})

describe("the image's bundle", () => {
  it("holds no in-memory API server, CNI simulation, demo or fast-json-patch, nor client-node's generated API", async () => {
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-arch-"))
    try {
      const { inputs } = await bundleWithInputs(outdir)
      expect(inputs.some((i) => i.startsWith("src/programs/main.ts"))).toBe(true)
      expect(inputs.filter((i) => i.startsWith("src/testing/") || i.includes("node_modules/fast-json-patch/"))).toEqual([])
      // client-node's KubeConfig without its generated API: the slim module in, no generated API class or model.
      expect(inputs).toContain("src/services/live/client-node-gen.ts")
      expect(inputs.filter((i) => /client-node\/dist\/gen\/(index|apis\/|models\/all)/.test(i))).toEqual([])
    } finally {
      fs.rmSync(outdir, { recursive: true, force: true })
    }
  })

  it("loads Node's own modules with require(): no ES import of a built-in, so node:http's lazy WebSocket never loads Node's internal undici", async () => {
    const outdir = fs.mkdtempSync(path.join(os.tmpdir(), "whereabouts-arch-"))
    try {
      const { outfile } = await bundleWithInputs(outdir)
      const text = fs.readFileSync(outfile, "utf8")
      // The banner's createRequire is the one ES import of a built-in left.
      const esImports = [...text.matchAll(/\bfrom\s*"((?:node:)?[a-z_/]+)"/g)].map((m) => m[1])
      expect(esImports).toEqual(["node:module"])
      // Every module of the bundle is evaluated before --help is answered; what they loaded is reported at exit.
      const probe = path.join(outdir, "probe.cjs")
      fs.writeFileSync(probe, 'process.on("exit", () => process.stderr.write(`\\nLOADED ${JSON.stringify(process.moduleLoadList.filter((m) => /undici/.test(m)))}\\n`))\n')
      const run = spawnSync(process.execPath, ["--require", probe, outfile, "--help"], { encoding: "utf8" })
      expect(run.status).toBe(0)
      expect(run.stdout).toContain("Usage: whereabouts-controller")
      expect(/LOADED (.*)/.exec(run.stderr)?.[1]).toBe("[]")
    } finally {
      fs.rmSync(outdir, { recursive: true, force: true })
    }
  })
})

/** Every function-like node of a file with its length in lines (a function nested in another counts on its own too). */
const functionLengths = (file: string): Array<{ readonly name: string; readonly lines: number }> => {
  const sf = parse(file)
  const out: Array<{ readonly name: string; readonly lines: number }> = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) || ts.isFunctionExpression(node) || ts.isArrowFunction(node) || ts.isMethodDeclaration(node)) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line
      const owner = ts.isVariableDeclaration(node.parent) ? node.parent.name.getText(sf) : (node as { name?: ts.Node }).name?.getText(sf) ?? "(anonymous)"
      out.push({ name: `${file}:${start + 1} ${owner}`, lines: end - start + 1 })
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
  return out
}

describe("src", () => {
  it("has no function longer than 80 lines", () => {
    const all = sources("src").flatMap(functionLengths)
    expect(all.length).toBeGreaterThan(500)
    expect(all.filter((f) => f.lines > 80).map((f) => `${f.name}: ${f.lines} lines`)).toEqual([])
  })

  it("every source file the manifests, the chart and the docs name exists (a rename leaves no stale pointer)", () => {
    const texts = ["README.md", ...["deploy", "charts", "docs"].flatMap((dir) => sources(dir, /\.(ya?ml|md|tpl)$/))]
    const files = new Set(["src", "test", "bench", "scripts"].flatMap((dir) => sources(dir).map((f) => path.basename(f))))
    const named = texts.flatMap((t) => [...fs.readFileSync(path.join(ROOT, t), "utf8").matchAll(/[\w.-]+\.ts\b/g)].map((m) => ({ t, name: path.basename(m[0]) })))
    expect(named.length).toBeGreaterThan(50)
    expect(named.filter((n) => !files.has(n.name)).map((n) => `${n.t}: ${n.name}`)).toEqual([])
  })

  it("calls the pool store's release in one module only, the executor", () => {
    const callers = sources("src/programs").filter((f) => /\bstore\s*\.\s*release\s*\(|IPPoolStore[\s\S]*\.release\s*\(/.test(fs.readFileSync(path.join(ROOT, f), "utf8")))
    expect(callers).toEqual(["src/programs/executor.ts"])
  })
})
