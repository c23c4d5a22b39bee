/** The contract suites the in-memory cluster passes, against layerLive and a real kube-apiserver. */
import { cachesContract } from "../services/contract/Caches.contract.ts"
import { kubeApiContract } from "../services/contract/KubeApi.contract.ts"
import { storesContract } from "../services/contract/Stores.contract.ts"
import { describeLive, liveKubeApi, uniqueNamespace } from "../support/live.ts"

describeLive("contracts on a real API server", () => {
  const layer = liveKubeApi()
  kubeApiContract({ name: "live", layer, namespace: uniqueNamespace("kubeapi") })
  cachesContract({ name: "live", layer, namespace: uniqueNamespace("caches") })
  storesContract({ name: "live", layer, namespace: uniqueNamespace("stores") })
})
