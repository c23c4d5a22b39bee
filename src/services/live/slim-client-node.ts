/**
 * Keeps client-node's generated API out of the process. The controller uses client-node for
 * kubeconfig handling only (KubeConfig: contexts, TLS files, exec and token-file credentials), but
 * dist/config.js imports two names from dist/gen/index.js, which loads every generated API class
 * and model, a large share of the process's resident memory. A synchronous module hook answers
 * that one import with ./client-node-gen, which exports just those two names.
 *
 * It must be registered before anything imports client-node, so the entry point (main.ts) calls it
 * and then imports the rest dynamically. Without it (tests, benchmarks) everything works, heavier.
 */
import { registerHooks } from "node:module"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const CONFIG_JS = /\/@kubernetes\/client-node\/dist\/config\.js$/

/** The slim module's URL: client-node-gen.ts from sources, client-node-gen.js once compiled. */
export const slimModuleUrl = (): string => new URL(`./client-node-gen${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url).href

let registered = false

export const slimClientNode = (): void => {
  if (registered) return
  registered = true
  const target = slimModuleUrl()
  registerHooks({
    resolve: (specifier, context, nextResolve) =>
      specifier === "./gen/index.js" && context.parentURL !== undefined && CONFIG_JS.test(context.parentURL)
        ? { url: target, shortCircuit: true }
        : nextResolve(specifier, context)
  })
}
