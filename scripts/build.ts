/**
 * The image's build: type-checks the sources (tsc -p tsconfig.build.json, no output), then
 * bundles src/programs/main.ts and every runtime dependency into one ES module, dist/main.js,
 * with esbuild. Why a bundle rather than tsc's one file per module and node_modules beside it:
 * V8 keeps the source text of every loaded module in the heap, and a module with a single
 * non-ASCII character (a "’" in a comment) is kept at two bytes per character; the bundle has
 * whitespace and comments removed, escapes non-ASCII, and holds only the modules reached from
 * main.ts (the resident memory it saves is in BENCHMARKS.md's Decisions table).
 * Identifiers are kept, so stack traces still name functions. Licence comments go to
 * dist/main.js.LEGAL.txt.
 *
 * client-node's KubeConfig is bundled without its generated API (src/services/live/client-node-gen.ts):
 * loading it then adds 34 MiB of RSS instead of 74 MiB (BENCHMARKS.md's Decisions table).
 *
 *   node scripts/build.ts [outdir]        (default dist/)
 */
import { execFileSync } from "node:child_process"
import { isBuiltin } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as esbuild from "esbuild"

const ROOT = fileURLToPath(new URL("..", import.meta.url))

export const ENTRY = path.join(ROOT, "src/programs/main.ts")
const SLIM = path.join(ROOT, "src/services/live/client-node-gen.ts")

/**
 * What the image must not carry: the simulation, the in-memory API server and the demo
 * (src/testing), reached only from the demo, tests and benchmarks.
 */
const TESTING = path.join(ROOT, "src/testing")

/** The esbuild namespace of the CommonJS facades over Node's own modules (builtins-by-require). */
const BUILTIN = "builtin-by-require"

/** Bundles the controller into `<outdir>/main.js`; returns that path and the source files inside. */
export const bundleWithInputs = async (outdir: string): Promise<{ readonly outfile: string; readonly inputs: ReadonlyArray<string> }> => {
  const outfile = path.join(outdir, "main.js")
  const result = await esbuild.build({
    entryPoints: [ENTRY],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node24",
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: "external",
    charset: "ascii",
    logLevel: "warning",
    metafile: true,
    // CommonJS dependencies (undici, prom-client) call require() for Node's own modules.
    banner: { js: 'import { createRequire as __whereaboutsRequire } from "node:module"; const require = __whereaboutsRequire(import.meta.url);' },
    plugins: [
      {
        name: "slim-client-node",
        setup: (build) => {
          build.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (args) =>
            /[\\/]@kubernetes[\\/]client-node[\\/]dist[\\/]config\.js$/.test(args.importer) ? { path: SLIM } : undefined
          )
        }
      },
      {
        // Node's own modules are loaded with require(), not import: an ES module import of a built-in
        // reads every one of its exports, lazy ones included (node:http's WebSocket loads Node's
        // internal copy of undici, node:fs's promises and node:util's getters a few dozen modules),
        // all of which stay resident. A CommonJS facade reads an export only when it is used.
        name: "builtins-by-require",
        setup: (build) => {
          build.onResolve({ filter: /^(node:)?[a-z_/]+$/ }, (args) =>
            args.kind === "import-statement" && isBuiltin(args.path)
              ? { path: args.path.startsWith("node:") ? args.path : `node:${args.path}`, namespace: BUILTIN }
              : undefined
          )
          build.onLoad({ filter: /.*/, namespace: BUILTIN }, (args) => ({ contents: `module.exports = require(${JSON.stringify(args.path)})`, loader: "js" }))
        }
      },
      {
        // main.ts loads the demo with a dynamic import; a static one from production code fails the build.
        name: "no-testing",
        setup: (build) => {
          build.onResolve({ filter: /testing[\\/]/ }, (args) => {
            const target = path.resolve(args.resolveDir, args.path)
            return target.startsWith(TESTING) ? { errors: [{ text: `${path.relative(ROOT, args.importer)} imports ${path.relative(ROOT, target)}: src/testing is not part of the image` }] } : undefined
          })
        }
      }
    ]
  })
  return { outfile, inputs: Object.keys(result.metafile.inputs) }
}

/** Bundles the controller into `<outdir>/main.js`; returns that path. */
export const bundle = async (outdir: string): Promise<string> => (await bundleWithInputs(outdir)).outfile

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  execFileSync(path.join(ROOT, "node_modules/.bin/tsc"), ["-p", path.join(ROOT, "tsconfig.build.json"), "--noEmit"], { cwd: ROOT, stdio: "inherit" })
  const out = await bundle(path.resolve(process.argv[2] ?? path.join(ROOT, "dist")))
  process.stdout.write(`${path.relative(process.cwd(), out)}\n`)
}
