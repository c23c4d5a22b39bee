/**
 * Layer composition: every service over one KubeApi, counted in Metrics. main provides the live
 * KubeApi; src/testing/layers.ts the embedded in-memory cluster (tests, demo, benchmarks).
 */
import { Layer } from "effect"
import * as Caches from "../services/Caches.ts"
import * as EventRecorder from "../services/EventRecorder.ts"
import { flowControl, instrument } from "../services/ApiFlow.ts"
import * as IPPoolStore from "../services/IPPoolStore.ts"
import type { KubeApi } from "../services/KubeApi.ts"
import * as LeaderElection from "../services/LeaderElection.ts"
import * as Metrics from "../services/Metrics.ts"
import * as Pods from "../services/Pods.ts"
import * as Reservations from "../services/Reservations.ts"

/** Stateless services: cheap, no background work. */
export const stores = Layer.mergeAll(IPPoolStore.layer, Reservations.layer, Pods.layer, EventRecorder.layer)

/** A KubeApi as the programs use it: every attempt counted (a 429 too), under ApiFlow.ts's flow control. */
export const programKubeApi = <E, R>(kubeApi: Layer.Layer<KubeApi, E, R>) => flowControl(instrument(kubeApi))

/** Everything the controller needs over a given KubeApi, with metrics exposed too (config and NAD configs from context). */
export const withKubeApi = <E, R>(kubeApi: Layer.Layer<KubeApi, E, R>, metrics: Layer.Layer<Metrics.Metrics> = Metrics.layer) =>
  Layer.mergeAll(stores, Caches.layer, LeaderElection.layer).pipe(Layer.provideMerge(programKubeApi(kubeApi)), Layer.provideMerge(metrics))
