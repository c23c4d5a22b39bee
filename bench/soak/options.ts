/**
 * `npm run soak -- [options]`: the command line (node:util's parseArgs), every value checked, a
 * wrong one refused with one line naming the option.
 */
import * as path from "node:path"
import { parseArgs } from "node:util"
import { ROOT } from "../lib/paths.ts"
import { FAULT_KINDS, type FaultKind } from "./fault-plan.ts"

/** The soak blocks BENCHMARKS.md has: the hour with every fault, and the one whose replicas live it (no leader kills). */
const PUBLISHED_AS = ["soak", "soak-steady"] as const
type PublishedAs = (typeof PUBLISHED_AS)[number]

export const USAGE = `npm run soak -- [options]
  --minutes N          how long the workload runs (default 60); then the system rests and is checked
  --seed N             the seed of every random choice (default 1): one seed, the same workload and faults
  --rate N             pods created per second (default 10)
  --fault-every S      one fault every S seconds (default 120; 0: none)
  --faults LIST        fault kinds, comma-separated (default all: ${FAULT_KINDS.join(",")})
  --publish            also write bench/results/soak.{json,svg} and BENCHMARKS.md's soak section
  --publish-as NAME    the same under another of BENCHMARKS.md's soak blocks: ${PUBLISHED_AS.join(", ")}
                       (soak-steady: the run without the leader kills, whose replicas live the hour)`

const positive = (name: string, text: string | undefined, fallback: number, { integer = false, zero = false } = {}): number => {
  if (text === undefined) return fallback
  const n = Number(text)
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !zero) || (integer && !Number.isInteger(n))) {
    throw new Error(`--${name} ${text}: expected a ${integer ? "whole " : ""}number ${zero ? "≥ 0" : "> 0"}`)
  }
  return n
}

const publishAs = (publish: boolean, as: string | undefined): PublishedAs | undefined => {
  if (as === undefined) return publish ? "soak" : undefined
  if (!(PUBLISHED_AS as ReadonlyArray<string>).includes(as)) throw new Error(`--publish-as ${as}: expected one of ${PUBLISHED_AS.join(", ")}`)
  return as as PublishedAs
}

export const parseOptions = (argv: ReadonlyArray<string>) => {
  const { values } = parseArgs({
    args: [...argv],
    strict: true,
    options: {
      minutes: { type: "string" },
      seed: { type: "string" },
      rate: { type: "string" },
      "fault-every": { type: "string" },
      faults: { type: "string" },
      publish: { type: "boolean" },
      "publish-as": { type: "string" },
      help: { type: "boolean", short: "h" }
    }
  })
  if (values.help === true) return "help" as const
  const minutes = positive("minutes", values.minutes, 60)
  const seed = positive("seed", values.seed, 1, { integer: true, zero: true })
  const faults = values.faults === undefined ? [...FAULT_KINDS] : values.faults.split(",").map((k) => k.trim()).filter((k) => k !== "")
  const unknown = faults.filter((k) => !(FAULT_KINDS as ReadonlyArray<string>).includes(k))
  if (unknown.length > 0) throw new Error(`--faults: unknown kind ${unknown.join(", ")} (known: ${FAULT_KINDS.join(", ")})`)
  return {
    minutes,
    seed,
    rate: positive("rate", values.rate, 10),
    faultEverySeconds: positive("fault-every", values["fault-every"], 120, { zero: true }),
    faults: faults as ReadonlyArray<FaultKind>,
    // Not options (no command sets them), but report.json records them with the rest.
    lifetimeSeconds: 30,
    delShare: 0.3,
    boundSeconds: 60,
    warmupSeconds: Math.min(300, minutes * 12),
    pluginSlots: 6,
    out: path.join(ROOT, "bench", ".soak", String(seed)),
    /** bench/results/<name>.{json,svg} and <name>-report.md, and BENCHMARKS.md's block of that name; undefined: not published. */
    publishAs: publishAs(values.publish === true, values["publish-as"])
  }
}

export type SoakOptions = Exclude<ReturnType<typeof parseOptions>, "help">

/** How far apart the mass deletions come: a quarter of the run, at least one minute, at most five. */
export const massEveryMs = (o: Pick<SoakOptions, "minutes">): number => Math.max(60_000, Math.min(300_000, (o.minutes * 60_000) / 4))
