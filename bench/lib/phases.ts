/**
 * One benchmark command's bookkeeping: progress lines, per-phase wall times, the load average at
 * both ends, and the closing step that writes the results and regenerates BENCHMARKS.md (or, for
 * a quick run, only prints the rows).
 */
import * as os from "node:os"
import * as path from "node:path"
import { ROOT } from "./paths.ts"
import { gitState, type Machine, regenerate, type Row, type Section, table, writeResults } from "./report.ts"
import { fmt } from "./stats.ts"

export const makePhases = (tag: string) => {
  const phases: Array<{ readonly phase: string; readonly seconds: number }> = []
  const started = performance.now()
  const load0 = os.loadavg()
  let phaseStart = started
  let phaseName = "start-up"
  const log = (line: string) => process.stderr.write(`[${tag}] ${line}\n`)
  /** Marks the start of a scenario, closing the previous one (its wall time goes to the results). */
  const phase = (name: string) => {
    phases.push({ phase: phaseName, seconds: Math.round((performance.now() - phaseStart) / 100) / 10 })
    phaseName = name
    phaseStart = performance.now()
    log(name)
  }
  /**
   * Closes the run: a "Conditions of this run" section first (`conditions` gets the load-average
   * sentence), then the results file and BENCHMARKS.md, or only the rows on stderr when `quick`.
   */
  const finish = (o: {
    readonly name: string
    readonly command: string
    readonly quick: boolean
    readonly machine: Machine
    readonly conditions: (load: string) => string
    readonly rows: ReadonlyArray<Row>
    readonly sections: Array<Section>
    readonly data: Record<string, unknown>
  }) => {
    phase("writing results")
    o.data["phases"] = phases
    const durationSeconds = (performance.now() - started) / 1000
    const load = `Load average (1 min) ${fmt(load0[0])} at the start and ${fmt(os.loadavg()[0])} at the end`
    o.sections.unshift({
      title: "Conditions of this run",
      body: `${o.conditions(load)} ${gitState()}\n\n${table(["phase", "wall time"], phases.slice(1).map((x) => [x.phase, `${fmt(x.seconds)} s`]))}`
    })
    if (o.quick) {
      log(`quick run done in ${fmt(durationSeconds)} s (results not written)`)
      for (const r of o.rows) log(`${r.scenario} | ${r.metric} | ${r.ours} | ${r.baseline} | ${r.ratio} | ${r.target} | ${r.met}`)
    } else {
      const file = writeResults({ name: o.name, command: o.command, date: new Date().toISOString(), durationSeconds, machine: o.machine, rows: o.rows, sections: o.sections, data: o.data })
      regenerate()
      log(`wrote ${path.relative(ROOT, file)} and BENCHMARKS.md in ${fmt(durationSeconds)} s`)
    }
    // The results are out: a benchmark whose event loop something still holds says what, and exits.
    setTimeout(() => {
      log(`still running 5 s after the results, held by: ${process.getActiveResourcesInfo().join(", ")}; exiting`)
      process.exit(0)
    }, 5_000).unref()
  }
  return { phase, log, finish }
}
