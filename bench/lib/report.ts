/**
 * Results of one benchmark command (summary rows, detail tables, the machine and the exact
 * command; bench/results/<name>.json) and BENCHMARKS.md's tables between its markers, regenerated
 * from them; everything outside the markers is hand-written and left alone.
 *
 *   node bench/lib/report.ts          (rewrite every block from the committed results)
 */
import { execFileSync } from "node:child_process"
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

/** A summary row; ratio, target and met "–" unless given. */
export const row = (scenario: string, metric: string, c: Pick<Row, "ours" | "baseline"> & Partial<Pick<Row, "ratio" | "target" | "met">>): Row => ({
  scenario,
  metric,
  ours: c.ours,
  baseline: c.baseline,
  ratio: c.ratio ?? "–",
  target: c.target ?? "–",
  met: c.met ?? "–"
})

export interface Section {
  readonly title: string
  /** Markdown: what was measured and how, then tables. */
  readonly body: string
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

export const machine = (extra: { readonly kubeApiserver?: string; readonly etcd?: string } = {}) => {
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

export type Machine = ReturnType<typeof machine>

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

/** Which code was measured: the commit and whether the work tree had changes (read-only git). */
export const gitState = (): string => {
  try {
    const commit = execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim()
    const dirty = execFileSync("git", ["status", "--porcelain", "--untracked-files=no", "--", "src"], { cwd: ROOT, encoding: "utf8" }).trimEnd()
    return `Code: commit ${commit}${dirty === "" ? "" : ` with uncommitted changes in ${dirty.split("\n").map((l) => l.slice(3)).join(", ")}`}.`
  } catch {
    return "Code: not a git checkout."
  }
}

const FILE = path.join(ROOT, "BENCHMARKS.md")
const begin = (name: string) => `<!-- BEGIN GENERATED: ${name} -->`
const end = (name: string) => `<!-- END GENERATED: ${name} -->`

export const render = (r: Results): string => {
  const m = r.machine
  const machineRows: Array<[string, string]> = [
    ["command", `\`${r.command}\``],
    ["date", r.date],
    ["wall time of the command", `${Math.round(r.durationSeconds)} s`],
    ["CPUs (os.cpus())", m.cpus],
    ["memory", m.memory],
    ["OS", m.os],
    ["Node.js", m.node],
    ["effect", m.effect],
    ["@kubernetes/client-node", m.clientNode],
    ["undici", m.undici]
  ]
  if (m.kubeApiserver !== undefined) machineRows.push(["kube-apiserver", m.kubeApiserver])
  if (m.etcd !== undefined) machineRows.push(["etcd", m.etcd])
  return [
    begin(r.name),
    "",
    `_Generated by \`${r.command}\` from \`bench/results/${r.name}.json\`; do not edit between the markers._`,
    "",
    table(["", ""], machineRows),
    "",
    table(
      ["scenario", "metric", "ours", "baseline", "ratio", "target", "met"],
      r.rows.map((x) => [x.scenario, x.metric, x.ours, x.baseline, x.ratio, x.target, x.met])
    ),
    "",
    ...r.sections.flatMap((s) => [`#### ${s.title}`, "", s.body.trim(), ""]),
    end(r.name)
  ].join("\n")
}

const RESULTS = ["memory", "apiserver", "scale", "upstream", "soak", "soak-steady"] as const

/** The commit a result measured, from its conditions ("Code: commit abc1234"). */
const commitOf = (r: Results): string => {
  for (const s of r.sections) {
    const m = /Code: commit ([0-9a-f]+)( with uncommitted changes)?/.exec(s.body)
    if (m !== null) return `${m[1]}${m[2] === undefined ? "" : " (dirty)"}`
  }
  return "?"
}

/**
 * The one-screen summary: every row that has a target, from every result, with where it was
 * measured (command, commit, date, machine).
 */
export const renderSummary = (results: ReadonlyArray<Results>): string => {
  const rows = results.flatMap((r) => r.rows.filter((x) => x.target !== "–").map((x) => ({ r, x })))
  const runs = results.map((r) => [`\`${r.command}\``, commitOf(r), r.date.slice(0, 10), `${r.machine.cpus}, ${r.machine.memory}, Node ${r.machine.node}${r.machine.kubeApiserver === undefined ? "" : `, kube-apiserver ${r.machine.kubeApiserver}`}`, `${Math.round(r.durationSeconds)} s`])
  return [
    begin("summary"),
    "",
    "_Generated from `bench/results/*.json` by each benchmark command (or `node bench/lib/report.ts`); do not edit between the markers._",
    "",
    table(
      ["scenario", "metric", "target", "latest", "baseline", "met", "from"],
      rows.map(({ r, x }) => [x.scenario, x.metric, x.target, x.ours, x.baseline, x.met, `\`${r.name}\``])
    ),
    "",
    table(["from", "command", "commit", "date", "machine", "wall time"], results.map((r, i) => [`\`${r.name}\``, ...runs[i]!])),
    "",
    end("summary")
  ].join("\n")
}

const replaceBlock = (text: string, name: string, block: string): string => {
  const a = text.indexOf(begin(name))
  const b = text.indexOf(end(name))
  return a >= 0 && b > a ? `${text.slice(0, a)}${block}${text.slice(b + end(name).length)}` : `${text.trimEnd()}\n\n${block}\n`
}

/** Replaces the block of each result that exists, and the summary; appends blocks whose markers are missing. */
export const regenerate = (names: ReadonlyArray<string> = RESULTS): void => {
  let text = fs.existsSync(FILE) ? fs.readFileSync(FILE, "utf8") : "# Benchmarks\n"
  const all = RESULTS.flatMap((name) => readResults(name) ?? [])
  text = replaceBlock(text, "summary", renderSummary(all))
  for (const r of all.filter((r) => names.includes(r.name))) text = replaceBlock(text, r.name, render(r))
  fs.writeFileSync(FILE, text)
}

if (process.argv[1]?.endsWith("report.ts") === true) regenerate()
