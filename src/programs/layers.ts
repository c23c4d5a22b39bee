/**
 * Layer composition: every service over one KubeApi, counted in Metrics. `memory` runs on the
 * embedded in-memory cluster (tests, demo, benchmarks); main provides the live KubeApi instead.
 */
import { Layer } from "effect"
import * as Caches from "../services/Caches.ts"
import * as ControllerConfig from "../services/ControllerConfig.ts"
import * as EventRecorder from "../services/EventRecorder.ts"
import { InMemoryCluster, type MemoryClusterOptions, layerMemory as memoryKubeApi } from "../services/InMemoryCluster.ts"
import { instrument } from "../services/InstrumentedKubeApi.ts"
import * as IPPoolStore from "../services/IPPoolStore.ts"
import type { KubeApi } from "../services/KubeApi.ts"
import * as LeaderElection from "../services/LeaderElection.ts"
import * as Metrics from "../services/Metrics.ts"
import * as NadConfigs from "../services/NadConfigs.ts"
import * as Pods from "../services/Pods.ts"
import * as Reservations from "../services/Reservations.ts"

/** Stateless services: cheap, no background work. */
export const stores = Layer.mergeAll(IPPoolStore.layer, Reservations.layer, Pods.layer, EventRecorder.layer)

/** Everything the controller needs, over the KubeApi, config, metrics and NAD configs in context. */
export const controllerServices = Layer.mergeAll(stores, Caches.layer, LeaderElection.layer)

/** The services over a given KubeApi, with metrics and config exposed too. */
export const withKubeApi = <E, R>(kubeApi: Layer.Layer<KubeApi, E, R>, metrics: Layer.Layer<Metrics.Metrics> = Metrics.layer) =>
  controllerServices.pipe(Layer.provideMerge(instrument(kubeApi)), Layer.provideMerge(metrics))

/**
 * The whole controller environment on a fresh in-memory cluster, also exposed so tests and the
 * demo change the world through it.
 */
export const memory = (
  config: Partial<ControllerConfig.ControllerConfigShape> = {},
  options: { readonly cluster?: MemoryClusterOptions; readonly flatFiles?: Readonly<Record<string, Record<string, unknown>>> } = {}
) =>
  withKubeApi(memoryKubeApi).pipe(
    Layer.provideMerge(Layer.mergeAll(ControllerConfig.layerWith(config), NadConfigs.layerMemory(options.flatFiles))),
    Layer.provideMerge(InMemoryCluster.layer(options.cluster))
  )
