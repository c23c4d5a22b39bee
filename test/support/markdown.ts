/** Reading Markdown the docs tests compare with the code: tables as rows of cells. */

/** The rows of the first Markdown table in `text` whose header starts with `header`, as cells without backticks ([] when there is none). */
export const tableRows = (text: string, header: string): Array<Array<string>> => {
  const lines = text.split("\n")
  const start = lines.findIndex((l) => l.startsWith(`| ${header} |`))
  if (start === -1) return []
  const rows: Array<Array<string>> = []
  for (const l of lines.slice(start + 2)) {
    if (!l.startsWith("|")) break
    rows.push(l.split("|").slice(1, -1).map((c) => c.trim().replaceAll("`", "")))
  }
  return rows
}
