/**
 * Runs upstream whereabouts' e2e test binary (scripts/whereabouts-e2e.sh) against a cluster and
 * reads its verdicts. Two facts of the suite (v0.9.2) shape how:
 *
 * - Its StatefulSet specs all create a StatefulSet `web`, and each deletes it with foreground
 *   propagation but waits only for its pods to go, not for the object: the garbage collector drops
 *   the object a little later (its queue backs off while the pods terminate), so the next spec's
 *   create can meet `object is being deleted`. Those specs therefore run one binary run each, and
 *   each waits until `web` is gone first. Every spec still runs exactly as written.
 * - ScaleStatefulSet reads the StatefulSet and writes it back without retrying a conflict, racing
 *   the StatefulSet controller's status writes. A spec that fails on that conflict, and on nothing
 *   else, runs once more; the report names it.
 * - "can recover from an exhausted IP pool" polls the pool for the new pod's allocation and indexes
 *   the podref's allocations without checking there is one (e2e_test.go:514): between the old
 *   pod's free and the new pod's ADD the poll panics, index out of range. A spec that fails only on
 *   that panic runs once more; the report names it.
 * - The StatefulSet specs' teardown reads the pool once, as soon as the last pod is gone: with the
 *   plugin's DEL the pool is empty by then, but where the controller alone frees, it frees only
 *   once the pod is gone (rule 2) and the read may come first. A spec that fails only on that read
 *   (its teardown's "leaked IPAllocations"), while every pool is empty within seconds after, runs
 *   once more; the report names it and how long the pools took.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { Effect } from "effect"
import { type Credentials, rest } from "./rest.ts"
import { waitUntil } from "./world.ts"

export interface SuiteReport {
  readonly ran: number
  readonly passed: number
  /** Full texts of the specs that failed (after their one rerun, for the known conflict). */
  readonly failed: ReadonlyArray<string>
  /** Specs run again after failing on one of the suite's own races named above, each with why. */
  readonly reruns: ReadonlyArray<string>
  /** Binary runs that did not end with a ginkgo summary (a crash, a timeout). */
  readonly broken: ReadonlyArray<string>
  readonly seconds: number
}

interface BinaryRun {
  readonly code: number | null
  readonly ran: number
  readonly passed: number
  readonly failed: ReadonlyArray<string>
  readonly output: string
}

/** Whether a list of IPPools holds no allocation. */
const allEmpty = (body: string): boolean =>
  ((JSON.parse(body) as { items?: ReadonlyArray<{ spec?: { allocations?: Record<string, unknown> } }> }).items ?? []).every((p) => Object.keys(p.spec?.allocations ?? {}).length === 0)

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")

/** The unretried read-modify-write of ScaleStatefulSet, losing to the StatefulSet controller. */
const SCALE_CONFLICT = /Operation cannot be fulfilled on statefulsets\.apps "web": the object has been modified/

/**
 * How many times a spec failed by one of the suite's races (below) is run again. The index race
 * hits whenever one of the suite's polls (every 500 ms) falls between the old allocation's free and
 * the new pod's: a clean-clone CI run at 253dadb lost it twice in a row.
 */
export const RACE_RERUNS = 3

/** The suite's own unguarded index of a podref's allocations while the new pod has none yet. */
const ALLOCATION_INDEX_PANIC = /Test Panicked\s+runtime error: index out of range \[0\] with length 0[\s\S]*e2e_test\.go:514/

/** The teardown's one read of the pool, right after the last pod is gone. */
const TEARDOWN_READ = /Failure in Spec Teardown \(AfterEach\)[\s\S]*cannot have leaked IPAllocations in the system/
/** How long every pool may take to be empty after such a read for it to count as that race. */
const TEARDOWN_FREE_WITHIN = "10 seconds"

/** One run of the binary with ginkgo flags; its output is appended to `logFile`. */
const runBinary = (binary: string, env: Readonly<Record<string, string>>, ginkgo: ReadonlyArray<string>, logFile: string, minutes: number) =>
  Effect.promise(
    () =>
      new Promise<BinaryRun>((resolve) => {
        const args = ["-test.v", "-test.timeout", `${minutes}m`, "-ginkgo.noColor", "-ginkgo.v", ...ginkgo]
        fs.appendFileSync(logFile, `\n===== ${binary} ${args.join(" ")}\n`)
        const child = spawn(binary, args, { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: os.tmpdir(), ...env }, stdio: ["ignore", "pipe", "pipe"] })
        let output = ""
        const keep = (b: Buffer) => {
          output += b.toString()
          fs.appendFileSync(logFile, b)
        }
        child.stdout.on("data", keep)
        child.stderr.on("data", keep)
        child.once("close", (code) => {
          const ran = /Ran (\d+) of \d+ Specs/.exec(output)
          const passed = /(\d+) Passed \| \d+ Failed/.exec(output)
          const failed = [...new Set(output.split("\n").flatMap((l) => (/^\[(Fail|Panic!)\] /.exec(l) === null ? [] : [l.slice(l.indexOf("] ") + 2).trim()])))]
          resolve({ code, ran: ran === null ? -1 : Number(ran[1]), passed: Number(passed?.[1] ?? 0), failed, output })
        })
      })
  )

/** Every spec's full text, from the binary's dry run (containers' texts and its own, as -ginkgo.focus matches them). */
export const listSpecs = (binary: string) =>
  Effect.map(runBinary(binary, {}, ["-ginkgo.dryRun"], os.devNull, 1), (r) =>
    r.output
      .split(/^-{10,}$/m)
      .map((block) => block.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("github.com/") && !/^[•SP]+$/.test(l) && !/^(Running Suite|=+|Random Seed|Will run|=== RUN)/.test(l)))
      .filter((lines) => lines.length >= 2 && lines[0]!.startsWith("Whereabouts"))
      .map((lines) => `${lines[0]} ${lines[1]}`)
  )

/**
 * The suite against the cluster of `kubeconfig`, but the specs in `skip` (full texts): the specs
 * outside StatefulSets in one run, then each StatefulSet spec in a run of its own once the previous
 * one's StatefulSet is gone.
 */
export const runUpstreamSuite = (options: {
  readonly binary: string
  readonly kubeconfig: string
  readonly admin: Credentials
  readonly skip: ReadonlyArray<string>
  readonly logFile: string
  /** The binary's -test.timeout for the run of the specs outside StatefulSets, and for each StatefulSet spec's. */
  readonly minutes: { readonly batch: number; readonly spec: number }
}) =>
  Effect.gen(function* () {
    const started = Date.now()
    fs.writeFileSync(options.logFile, "")
    const env = { KUBECONFIG: options.kubeconfig, NUMBER_OF_COMPUTE_NODES: "2" }
    const specs = (yield* listSpecs(options.binary)).filter((s) => !options.skip.includes(s))
    const statefulSpecs = specs.filter((s) => s.includes(" stateful set tests "))
    const skipAlone = [...options.skip, ...statefulSpecs].map((s) => `(${escape(s)}$)`).join("|")
    const runs: Array<BinaryRun> = [yield* runBinary(options.binary, env, ["-ginkgo.skip", skipAlone], options.logFile, options.minutes.batch)]
    const reruns: Array<string> = []
    const stuck: Array<string> = []
    // A spec that broke off may leave its StatefulSet: the next one would only fail on it, so the runs stop there.
    const webGone = Effect.either(
      waitUntil("the previous spec's StatefulSet web gone", Effect.promise(() => rest(options.admin, "GET", "/apis/apps/v1/namespaces/default/statefulsets/web")), (r) => r.status === 404, { timeout: "120 seconds" })
    )
    // Every pool empty within TEARDOWN_FREE_WITHIN: the teardown's read came before the controller's free.
    const poolsEmptied = Effect.gen(function* () {
      const from = Date.now()
      const empty = yield* Effect.either(
        waitUntil("every IPPool empty after the teardown", Effect.promise(() => rest(options.admin, "GET", "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/kube-system/ippools")), (r) => r.status === 200 && allEmpty(r.body), {
          timeout: TEARDOWN_FREE_WITHIN
        })
      )
      return empty._tag === "Right" ? `the teardown read the pool before the controller freed it; every pool empty ${Date.now() - from} ms after the failure` : undefined
    })
    /** Which of the suite's races failed a run that failed once, or undefined. */
    const raceOf = (run: BinaryRun): Effect.Effect<string | undefined> => {
      if (run.failed.length === 0 || run.output.split(/• Failure|•! Panic/).length !== 2) return Effect.succeed(undefined)
      if (SCALE_CONFLICT.test(run.output)) return Effect.succeed("the suite's unretried conflict")
      if (ALLOCATION_INDEX_PANIC.test(run.output)) return Effect.succeed("the suite's unguarded index of the new pod's allocation, e2e_test.go:514")
      return TEARDOWN_READ.test(run.output) ? poolsEmptied : Effect.succeed(undefined)
    }
    for (const spec of statefulSpecs) {
      if ((yield* webGone)._tag === "Left") {
        stuck.push(`StatefulSet web still there before: ${spec}`)
        break
      }
      const focus = ["-ginkgo.focus", `${escape(spec)}$`]
      let run = yield* runBinary(options.binary, env, focus, options.logFile, options.minutes.spec)
      // A failure that is one of the suite's own races is run again, at most RACE_RERUNS times.
      for (let again = 0; again < RACE_RERUNS; again++) {
        const why = yield* raceOf(run)
        if (why === undefined || (yield* webGone)._tag === "Left") break
        reruns.push(`${spec} (${why})`)
        run = yield* runBinary(options.binary, env, focus, options.logFile, options.minutes.spec)
      }
      runs.push(run)
    }
    return {
      ran: runs.reduce((n, r) => n + Math.max(r.ran, 0), 0),
      passed: runs.reduce((n, r) => n + r.passed, 0),
      failed: runs.flatMap((r) => r.failed),
      reruns,
      broken: [...runs.filter((r) => r.ran < 0 || (r.code !== 0 && r.failed.length === 0)).map((r) => `exit ${r.code}: ${r.output.split("\n").slice(-5).join(" | ")}`), ...stuck],
      seconds: Math.round((Date.now() - started) / 1000)
    } satisfies SuiteReport
  })
