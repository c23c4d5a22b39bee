/** Least-squares lines through measurements, and where such a line crosses a ceiling. */

export interface LinearFit {
  readonly slope: number
  readonly intercept: number
  /** Coefficient of determination (1: every point on the line); NaN when the ys do not vary. */
  readonly r2: number
  readonly points: number
}

/** The least-squares line y = intercept + slope·x; undefined below two distinct xs. */
export const linearFit = (points: ReadonlyArray<readonly [number, number]>): LinearFit | undefined => {
  const n = points.length
  if (n < 2) return undefined
  const mx = points.reduce((a, [x]) => a + x, 0) / n
  const my = points.reduce((a, [, y]) => a + y, 0) / n
  let sxx = 0
  let sxy = 0
  let syy = 0
  for (const [x, y] of points) {
    sxx += (x - mx) ** 2
    sxy += (x - mx) * (y - my)
    syy += (y - my) ** 2
  }
  if (sxx === 0) return undefined
  const slope = sxy / sxx
  const intercept = my - slope * mx
  const residual = points.reduce((a, [x, y]) => a + (y - (intercept + slope * x)) ** 2, 0)
  return { slope, intercept, r2: syy === 0 ? Number.NaN : 1 - residual / syy, points: n }
}

/** The x at which the line reaches `y`; undefined when it never does going up (slope ≤ 0). */
export const crossing = (fit: LinearFit, y: number): number | undefined => (fit.slope > 0 ? (y - fit.intercept) / fit.slope : undefined)
