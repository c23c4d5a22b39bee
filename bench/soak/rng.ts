/**
 * The soak's randomness: one seed, and every choice drawn from a stream derived from it by a name
 * (the workload's, the faults'), so one seed reproduces the same choices and changing how many
 * draws one stream makes leaves the others as they were. sfc32 seeded through a string hash: a
 * few lines, no library.
 */

/** 32-bit words from a string (xmur3). */
const hashWords = (text: string): (() => number) => {
  let h = 1779033703 ^ text.length
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 3432918353)
    h = (h << 13) | (h >>> 19)
  }
  return () => {
    h = Math.imul(h ^ (h >>> 16), 2246822507)
    h = Math.imul(h ^ (h >>> 13), 3266489909)
    return (h ^= h >>> 16) >>> 0
  }
}

/** The stream named `name` of `seed`. */
export const rngOf = (seed: number, name: string) => {
  const words = hashWords(`${seed}/${name}`)
  let a = words()
  let b = words()
  let c = words()
  let d = words()
  const next = (): number => {
    a >>>= 0
    b >>>= 0
    c >>>= 0
    d >>>= 0
    let t = (a + b) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    d = (d + 1) | 0
    t = (t + d) | 0
    c = (c + t) | 0
    return (t >>> 0) / 4294967296
  }
  // The first draws of sfc32 still show the seed's bits: discard a few.
  for (let i = 0; i < 12; i++) next()
  /** An integer in [0, n). */
  const int = (n: number) => Math.floor(next() * n)
  return {
    /** A float in [0, 1). */
    next,
    int,
    between: (lo: number, hi: number) => lo + next() * (hi - lo),
    chance: (p: number) => next() < p,
    pick: <A>(items: ReadonlyArray<A>): A => {
      if (items.length === 0) throw new Error("pick from nothing")
      return items[int(items.length)]!
    },
    /** Exponentially distributed with this mean (inter-arrival times, lifetimes). */
    exp: (mean: number) => -Math.log(1 - next()) * mean,
    /** A copy of `items` in a random order. */
    shuffle: <A>(items: ReadonlyArray<A>): Array<A> => {
      const out = [...items]
      for (let i = out.length - 1; i > 0; i--) {
        const j = int(i + 1)
        ;[out[i], out[j]] = [out[j]!, out[i]!]
      }
      return out
    }
  }
}

export type Rng = ReturnType<typeof rngOf>
