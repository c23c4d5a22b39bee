/**
 * The soak's plot, written as SVG by hand (a few shapes; no plotting library): RSS of each
 * replica, the work queue's depth, and delete → free latency against time, fault windows shaded
 * across all three.
 */

export interface Series {
  readonly label: string
  readonly color: string
  /** [ms since start, value] */
  readonly points: ReadonlyArray<readonly [number, number]>
}

export interface Panel {
  readonly title: string
  readonly unit: string
  /** Lines (a gap where one process ended and the next began: one series each). */
  readonly lines?: ReadonlyArray<Series>
  readonly dots?: ReadonlyArray<Series>
  readonly log?: boolean
}

const W = 1000
const PANEL_H = 170
const LEFT = 70
const RIGHT = 150
const TOP = 28
const GAP = 34
const BOTTOM = 16

const esc = (s: string) => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")

/** 1, 2 or 5 times a power of ten, about `n` steps over [0, hi]. */
const niceTicks = (hi: number, n = 4): ReadonlyArray<number> => {
  const raw = hi / n
  const pow = 10 ** Math.floor(Math.log10(raw || 1))
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? raw
  const out: Array<number> = []
  for (let v = 0; v <= hi + 1e-9; v += step) out.push(Math.round(v * 1e6) / 1e6)
  return out
}

/** The plot of a run of `durationMs`; `windows` are the fault windows ([start, end] ms since start). */
export const renderPlot = (o: { readonly durationMs: number; readonly windows: ReadonlyArray<readonly [number, number]>; readonly panels: ReadonlyArray<Panel>; readonly title: string }): string => {
  const height = TOP + o.panels.length * (PANEL_H + GAP) + BOTTOM
  const plotW = W - LEFT - RIGHT
  const x = (t: number) => LEFT + (Math.min(Math.max(t, 0), o.durationMs) / o.durationMs) * plotW
  const out: Array<string> = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${height}" fill="white"/>`,
    `<text x="${LEFT}" y="16" font-size="13" font-weight="bold">${esc(o.title)}</text>`
  ]
  const minutes = o.durationMs / 60_000
  const xTicks = niceTicks(minutes, minutes > 20 ? 12 : 6)
  o.panels.forEach((panel, i) => {
    const top = TOP + i * (PANEL_H + GAP) + 14
    const values = [...(panel.lines ?? []), ...(panel.dots ?? [])].flatMap((s) => s.points.map((p) => p[1])).filter((v) => Number.isFinite(v) && (!panel.log || v > 0))
    const hi = values.length === 0 ? 1 : Math.max(...values)
    const lo = panel.log ? Math.max(Math.min(...values, 1), 0.01) : 0
    const [a, b] = panel.log ? [Math.floor(Math.log10(lo)), Math.ceil(Math.log10(hi * 1.05))] : [0, hi * 1.1 || 1]
    const y = (v: number) => top + PANEL_H - (((panel.log ? Math.log10(Math.max(v, 10 ** a)) : v) - a) / (b - a || 1)) * PANEL_H
    out.push(`<text x="${LEFT}" y="${top - 5}" font-weight="bold">${esc(panel.title)} (${esc(panel.unit)})</text>`)
    o.windows.forEach(([s, e], k) => {
      out.push(`<rect x="${x(s).toFixed(1)}" y="${top}" width="${Math.max(1, x(e) - x(s)).toFixed(1)}" height="${PANEL_H}" fill="#f4cccc" opacity="0.6"/>`)
      if (i === 0) out.push(`<text x="${x(s).toFixed(1)}" y="${top + 10}" font-size="9" fill="#a33">${k + 1}</text>`)
    })
    out.push(`<rect x="${LEFT}" y="${top}" width="${plotW}" height="${PANEL_H}" fill="none" stroke="#999"/>`)
    const yTicks = panel.log ? Array.from({ length: b - a + 1 }, (_, k) => 10 ** (a + k)) : niceTicks(b)
    for (const v of yTicks) {
      out.push(`<line x1="${LEFT - 4}" x2="${LEFT + plotW}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#eee"/>`)
      out.push(`<text x="${LEFT - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`)
    }
    for (const m of xTicks) out.push(`<text x="${x(m * 60_000).toFixed(1)}" y="${top + PANEL_H + 13}" text-anchor="middle">${m} min</text>`)
    for (const s of panel.lines ?? []) {
      if (s.points.length === 0) continue
      out.push(`<polyline fill="none" stroke="${s.color}" stroke-width="1.2" points="${s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}"/>`)
    }
    for (const s of panel.dots ?? []) for (const [t, v] of s.points) out.push(`<circle cx="${x(t).toFixed(1)}" cy="${y(v).toFixed(1)}" r="1.6" fill="${s.color}" opacity="0.7"/>`)
    const legend = [...new Map([...(panel.lines ?? []), ...(panel.dots ?? [])].map((s) => [s.label, s.color] as const))]
    legend.forEach(([label, color], k) => {
      out.push(`<rect x="${LEFT + plotW + 12}" y="${top + 6 + k * 16}" width="10" height="10" fill="${color}"/>`)
      out.push(`<text x="${LEFT + plotW + 26}" y="${top + 15 + k * 16}">${esc(label)}</text>`)
    })
  })
  out.push(`<text x="${LEFT}" y="${height - 4}" fill="#a33">shaded: fault windows, numbered as in the report</text>`, "</svg>")
  return `${out.join("\n")}\n`
}
