/** `--name <number>` taken out of `args` (mutated), or `fallback` when absent: the A/B tools' options. */
export const takeNumber = (args: Array<string>, name: string, fallback: number): number => {
  const i = args.indexOf(name)
  if (i < 0) return fallback
  const [value] = args.splice(i, 2).slice(1)
  return Number(value)
}
