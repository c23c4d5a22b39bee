/** Progress lines and per-phase wall times of a benchmark command (the "phase" tables). */
export const makePhases = (tag: string) => {
  const phases: Array<{ readonly phase: string; readonly seconds: number }> = []
  let phaseStart = performance.now()
  let phaseName = "start-up"
  const log = (line: string) => process.stderr.write(`[${tag}] ${line}\n`)
  /** Marks the start of a scenario, closing the previous one (its wall time goes to the results). */
  const phase = (name: string) => {
    phases.push({ phase: phaseName, seconds: Math.round((performance.now() - phaseStart) / 100) / 10 })
    phaseName = name
    phaseStart = performance.now()
    log(name)
  }
  return { phases, phase, log }
}
