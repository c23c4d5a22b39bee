/**
 * Specs of upstream whereabouts' e2e suite (v0.9.2) that test/live/upstream-e2e.test.ts does not
 * run, each with why. Only a failure whose cause lies outside the controller belongs here (a race
 * in the suite itself, a component this harness does not run): a failure of the controller is
 * fixed, never listed. docs/compatibility.md repeats this list.
 */

export type E2eMode = "leak" | "del"

export interface E2eSkip {
  /** The spec's full text as ginkgo prints it: its containers' texts and its own, space-separated. */
  readonly spec: string
  /** The modes it is skipped in. */
  readonly modes: ReadonlyArray<E2eMode>
  readonly reason: string
}

export const UPSTREAM_E2E_SKIPS: ReadonlyArray<E2eSkip> = []

/** The full texts of the specs skipped in a mode. */
export const skippedIn = (mode: E2eMode): ReadonlyArray<string> => UPSTREAM_E2E_SKIPS.filter((s) => s.modes.includes(mode)).map((s) => s.spec)
