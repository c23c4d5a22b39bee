/**
 * The whole controller environment on a fresh in-memory cluster, plus the writer the CNI
 * simulation uses, so tests, the demo and benchmarks change the world through the same services.
 */
import { Layer } from "effect"
import { stores, withKubeApi } from "../programs/layers.ts"
import * as ControllerConfig from "../services/ControllerConfig.ts"
import * as Metrics from "../services/Metrics.ts"
import * as NadConfigs from "../services/NadConfigs.ts"
import { InMemoryCluster, type MemoryClusterOptions, layerMemory as memoryKubeApi } from "./InMemoryCluster.ts"
import * as PluginStore from "./PluginStore.ts"

/** The in-memory environment; the cluster itself is exposed as `InMemoryCluster`. */
export const memory = (
  config: Partial<ControllerConfig.ControllerConfigShape> = {},
  options: { readonly cluster?: MemoryClusterOptions; readonly flatFiles?: Readonly<Record<string, Record<string, unknown>>> } = {}
) =>
  PluginStore.layer.pipe(
    Layer.provideMerge(withKubeApi(memoryKubeApi)),
    Layer.provideMerge(Layer.mergeAll(ControllerConfig.layerWith(config), NadConfigs.layerMemory(options.flatFiles))),
    Layer.provideMerge(InMemoryCluster.layer(options.cluster))
  )

/** The services the CNI simulation writes through, over whatever KubeApi and config are provided. */
export const simulationStores = Layer.mergeAll(stores, PluginStore.layer).pipe(Layer.provide(Metrics.layer))
