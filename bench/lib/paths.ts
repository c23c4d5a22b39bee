/** The repository root, whatever the working directory. */
import { fileURLToPath } from "node:url"

export const ROOT = fileURLToPath(new URL("../..", import.meta.url))
