/**
 * Results of one benchmark command: summary rows (ours, baseline, ratio, target, met), detail
 * tables, the machine and the exact command; written to bench/results/<name>.json.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { ROOT } from "./paths.ts"

export interface Row {
  /** Table label of the scenario. */
  readonly scenario: string
  /** What was measured, with its unit. */
  readonly metric: string
  readonly ours: string
  readonly baseline: string
  /** How many times better ours is (baseline ÷ ours for costs), "–" without a baseline. */
  readonly ratio: string
  readonly target: string
  /** "yes", "no", or "–" (no target for this row). */
  readonly met: string
}

export interface Section {
  readonly title: string
  /** Markdown: what was measured and how, then tables. */
  readonly body: string
}

export interface Machine {
  readonly cpus: string
  readonly memory: string
  readonly os: string
  readonly node: string
  readonly effect: string
  readonly clientNode: string
  readonly undici: string
  readonly kubeApiserver?: string
  readonly etcd?: string
}

export interface Results {
  readonly name: string
  readonly command: string
  readonly date: string
  readonly durationSeconds: number
  readonly machine: Machine
  readonly rows: ReadonlyArray<Row>
  readonly sections: ReadonlyArray<Section>
  /** Raw numbers behind the rows (every repetition), for anyone who wants to recompute. */
  readonly data: Record<string, unknown>
}

const pkgVersion = (name: string): string => {
  try {
    return (JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", name, "package.json"), "utf8")) as { version: string }).version
  } catch {
    return "?"
  }
}

export const machine = (extra: { readonly kubeApiserver?: string; readonly etcd?: string } = {}): Machine => {
  const cpus = os.cpus()
  return {
    cpus: `${cpus.length} × ${cpus[0]?.model.trim() ?? "?"}`,
    memory: `${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    effect: pkgVersion("effect"),
    clientNode: pkgVersion("@kubernetes/client-node"),
    undici: pkgVersion("undici"),
    ...extra
  }
}

export const resultsPath = (name: string): string => path.join(ROOT, "bench", "results", `${name}.json`)

export const writeResults = (r: Results): string => {
  const file = resultsPath(r.name)
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const tmp = `${file.slice(0, -".json".length)}.tmp.json`
  fs.writeFileSync(tmp, `${JSON.stringify(r, null, 2)}\n`)
  fs.renameSync(tmp, file)
  return file
}

export const readResults = (name: string): Results | undefined => {
  try {
    return JSON.parse(fs.readFileSync(resultsPath(name), "utf8")) as Results
  } catch {
    return undefined
  }
}

/** A markdown table. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string | number>>): string =>
  [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...rows.map((r) => `| ${r.map(String).join(" | ")} |`)].join("\n")

export const yesNo = (ok: boolean | undefined): string => (ok === undefined ? "–" : ok ? "yes" : "no")
