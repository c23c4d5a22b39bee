/**
 * What client-node's KubeConfig (dist/config.js) imports from its generated API: the image's
 * bundle (scripts/build.ts) hands config.js this module instead of dist/gen/index.js, so the
 * hundreds of generated API classes and models the controller never uses are not in it.
 * test/services/client-node-gen.test.ts checks these names against config.js's import.
 */
export { createConfiguration } from "@kubernetes/client-node/dist/gen/configuration.js"
export { ServerConfiguration } from "@kubernetes/client-node/dist/gen/servers.js"
