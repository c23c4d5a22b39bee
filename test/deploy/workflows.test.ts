/**
 * .github/workflows: actionlint (from scripts/actionlint.sh) finds nothing in any workflow, and
 * does find the faults of a deliberately broken one, so a clean result means something. The
 * release workflow is also read statically: what it publishes, where, with which permissions,
 * and that it names the image and helm the rest of the project names.
 */
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { parse } from "yaml"
import { type Obj, ROOT, findGoAsset, needAll } from "./support/tools.ts"

const WORKFLOWS = join(ROOT, ".github/workflows")
const workflowFiles = readdirSync(WORKFLOWS).filter((f) => /\.ya?ml$/.test(f)).map((f) => join(WORKFLOWS, f))

interface Finding {
  readonly message: string
  readonly filepath: string
  readonly line: number
  readonly kind: string
}

/** actionlint's findings as JSON. shellcheck and pyflakes are off: the verdict must not depend on what else is installed. */
const actionlint = (bin: string, files: ReadonlyArray<string>): { readonly code: number | null; readonly findings: ReadonlyArray<Finding>; readonly stderr: string } => {
  const run = spawnSync(bin, ["-shellcheck=", "-pyflakes=", "-format", "{{json .}}", ...files], { encoding: "utf8", cwd: ROOT })
  const findings = run.stdout.trim() === "" ? [] : (JSON.parse(run.stdout) as Array<Finding>)
  return { code: run.status, findings, stderr: run.stderr }
}

const found = needAll("test/deploy/workflows.test.ts", { actionlint: findGoAsset("actionlint.sh", "ACTIONLINT") })
const lint = "reason" in found ? describe.skip : describe

lint(`actionlint on .github/workflows${"reason" in found ? ` — skipped: ${found.reason}` : ""}`, () => {
  const bin = () => ("reason" in found ? "" : found.actionlint)

  it("finds nothing in any workflow", () => {
    expect(workflowFiles.length).toBeGreaterThan(0)
    const run = actionlint(bin(), workflowFiles)
    expect(run.findings.map((f) => `${f.filepath}:${f.line} [${f.kind}] ${f.message}`)).toEqual([])
    expect(run.code, run.stderr).toBe(0)
  })

  it("flags a broken workflow: an unknown action input, an undefined step output, a bad permission", () => {
    const dir = mkdtempSync(join(tmpdir(), "wac-actionlint-"))
    try {
      const broken = join(dir, "broken.yml")
      writeFileSync(
        broken,
        [
          "name: broken",
          "on: { push: { tags: ['v*'] } }",
          "permissions: { packages: scribble }",
          "jobs:",
          "  build:",
          "    runs-on: ubuntu-24.04",
          "    steps:",
          "      - uses: docker/build-push-action@v7",
          "        with: { platform: linux/arm64 }",
          "      - run: echo ${{ steps.meta.outputs.tags }}"
        ].join("\n")
      )
      const run = actionlint(bin(), [broken])
      expect(run.code).toBe(1)
      const kinds = new Set(run.findings.map((f) => f.kind))
      for (const k of ["action", "expression", "permissions"]) expect(kinds, `${k} in ${JSON.stringify(run.findings)}`).toContain(k)
      expect(run.findings.some((f) => f.message.includes('"platform"'))).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("the release workflow", () => {
  const workflow = parse(readFileSync(join(WORKFLOWS, "release.yml"), "utf8")) as Obj
  const steps = workflow["jobs"]["release"]["steps"] as Array<Obj>
  const step = (uses: string): Obj => {
    const s = steps.find((x) => String(x["uses"] ?? "").startsWith(`${uses}@`))
    if (s === undefined) throw new Error(`release.yml has no step using ${uses}`)
    return s
  }
  const scripts = steps.map((s) => String(s["run"] ?? "")).join("\n")

  it("runs on a v* tag, with read access to the code and write access to packages only", () => {
    expect(workflow["on"]).toEqual({ push: { tags: ["v*"] } })
    expect(workflow["permissions"]).toEqual({ contents: "read", packages: "write" })
    expect(workflow["jobs"]["release"]["permissions"]).toBeUndefined()
  })

  it("pins every action to a version", () => {
    const uses = steps.flatMap((s) => (s["uses"] === undefined ? [] : [String(s["uses"])]))
    expect(uses.length).toBeGreaterThanOrEqual(6)
    for (const u of uses) expect(u).toMatch(/^[\w.-]+\/[\w.-]+@v\d+(\.\d+){0,2}$/)
  })

  it("builds the multi-arch image with QEMU and buildx and pushes it to GHCR under the deployed image's name, tagged from the git tag", () => {
    for (const a of ["docker/setup-qemu-action", "docker/setup-buildx-action", "docker/login-action"]) step(a)
    const build = step("docker/build-push-action")["with"] as Obj
    expect(build["platforms"]).toBe("linux/amd64,linux/arm64")
    expect(build["push"]).toBe(true)
    const meta = step("docker/metadata-action")["with"] as Obj
    expect(meta["images"]).toBe("ghcr.io/${{ steps.version.outputs.owner }}/whereabouts-controller")
    expect(String(meta["tags"])).toContain("type=semver,pattern={{version}}")
    // The last path segment is the one deploy/ and the chart install.
    const deployImage = /image:\s*(\S+):/.exec(readFileSync(join(ROOT, "deploy/deployment.yaml"), "utf8"))![1]!
    expect(deployImage.split("/").at(-1)).toBe("whereabouts-controller")
    expect(step("docker/login-action")["with"]).toMatchObject({ registry: "ghcr.io" })
  })

  it("refuses a tag that is not package.json's version, and lowercases the owner GHCR names", () => {
    expect(scripts).toContain('version="${TAG#v}"')
    expect(scripts).toMatch(/jq -r \.version package\.json/)
    expect(scripts).toContain('echo "owner=${OWNER,,}"')
  })

  it("packages the chart with the tag's version and pushes it to oci://ghcr.io/<owner>/charts with the helm the tests use", () => {
    expect(scripts).toContain('helm package charts/whereabouts-controller --version "$VERSION" --app-version "$VERSION"')
    expect(scripts).toContain('helm push "dist-chart/whereabouts-controller-$VERSION.tgz" "oci://ghcr.io/$OWNER/charts"')
    const helmVersion = /HELM_VERSION="\$\{HELM_VERSION:-(v[\d.]+)\}"/.exec(readFileSync(join(ROOT, "scripts/helm.sh"), "utf8"))![1]
    expect(step("azure/setup-helm")["with"]).toEqual({ version: helmVersion })
  })
})
