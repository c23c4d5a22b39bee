/**
 * Layer composition: every service over one KubeApi, counted in Metrics. main provides the live
 * KubeApi; src/testing/layers.ts the embedded in-memory cluster (tests, demo, benchmarks).
 */
import { Layer } from "effect"
import * as Caches from "../services/Caches.ts"
import * as EventRecorder from "../services/EventRecorder.ts"
import { flowControl } from "../services/ApiFlow.ts"
import { instrument } from "../services/InstrumentedKubeApi.ts"
import * as IPPoolStore from "../services/IPPoolStore.ts"
import type { KubeApi } from "../services/KubeApi.ts"
import * as LeaderElection from "../services/LeaderElection.ts"
import * as Metrics from "../services/Metrics.ts"
import * as Pods from "../services/Pods.ts"
import * as Reservations from "../services/Reservations.ts"

/** Stateless services: cheap, no background work. */
export const stores = Layer.mergeAll(IPPoolStore.layer, Reservations.layer, Pods.layer, EventRecorder.layer)

/** Everything the controller needs, over the KubeApi, config, metrics and NAD configs in context. */
export const controllerServices = Layer.mergeAll(stores, Caches.layer, LeaderElection.layer)

/**
 * A KubeApi as the programs use it: every attempt counted (a 429 too), under the flow control of
 * ApiFlow.ts (bounds per kind of work, the server's Retry-After).
 */
export const programKubeApi = <E, R>(kubeApi: Layer.Layer<KubeApi, E, R>) => flowControl(instrument(kubeApi))

/** The services over a given KubeApi, with metrics and config exposed too. */
export const withKubeApi = <E, R>(kubeApi: Layer.Layer<KubeApi, E, R>, metrics: Layer.Layer<Metrics.Metrics> = Metrics.layer) =>
  controllerServices.pipe(Layer.provideMerge(programKubeApi(kubeApi)), Layer.provideMerge(metrics))
