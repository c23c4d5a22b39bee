#!/usr/bin/env node
/**
 * Entry point: keeps client-node's generated API out of the process (slim-client-node.ts), then
 * loads the composition (app.ts). app.ts is imported dynamically because the hook must be in place
 * before the module graph that contains client-node is resolved.
 */
import { slimClientNode } from "../services/live/slim-client-node.ts"

slimClientNode()
await import("./app.ts")
