/**
 * Realistic pods, as a Deployment's pods look in a cluster with Multus: labels, ownerReferences,
 * managedFields of four managers, a two-container spec with a sidecar, probes, env, volumes, a
 * status with conditions and container statuses, and both Multus annotations. Deterministic
 * per index, so every run and both contenders see the same bytes.
 */
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from "../../src/domain/multus.ts"
import { podRef, projectPod } from "../../src/domain/pod.ts"
import { makeInformer } from "../../src/services/Informer.ts"
import type { KubeObject } from "../../src/services/KubeApi.ts"
import * as R from "../../src/services/resources.ts"

/** A pod informer caching the controller's projection (`projectPod`, as Caches does) or, as the baseline does, whole objects. */
export const podInformer = (projected: boolean) =>
  projected
    ? makeInformer({ resource: R.Pods, transform: projectPod, keyOf: podRef, identityOf: (p) => p.uid, versionOf: (p) => p.resourceVersion })
    : makeInformer<KubeObject>({
        resource: R.Pods,
        transform: (o) => o,
        keyOf: (o) => `${o.metadata.namespace}/${o.metadata.name}`,
        identityOf: (o) => o.metadata.uid ?? "",
        versionOf: (o) => o.metadata.resourceVersion
      })

/** `len` hex digits, deterministic per index and salt (ids, hashes). */
export const hex = (i: number, len: number, salt = 0): string => {
  let out = ""
  let x = (i * 2654435761 + salt * 40503) >>> 0
  while (out.length < len) {
    x = (x * 1103515245 + 12345) >>> 0
    out += x.toString(16).padStart(8, "0")
  }
  return out.slice(0, len)
}

const uid = (i: number, salt: number) => {
  const h = hex(i, 32, salt)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`
}

const mac = (i: number, k: number) => `0a:58:${hex(i, 8, k).match(/../g)!.join(":")}`

/** Multus' network-status for a pod with these secondary IPs (plus the cluster network). */
export const networkStatusFor = (i: number, attachments: ReadonlyArray<{ readonly network: string; readonly ifname: string; readonly ips: ReadonlyArray<string> }>): string =>
  JSON.stringify([
    { name: "cluster-network", interface: "eth0", ips: [`10.244.${(i >> 8) & 255}.${i & 255}`], mac: mac(i, 0), default: true, dns: {} },
    ...attachments.map((a, k) => ({ name: a.network, interface: a.ifname, ips: a.ips, mac: mac(i, k + 1), dns: {} }))
  ])

const TS = "2025-11-20T10:00:00Z"

const fieldsV1Spec = {
  "f:metadata": { "f:generateName": {}, "f:labels": { ".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {} }, "f:ownerReferences": { ".": {}, 'k:{"uid":"x"}': {} } },
  "f:spec": {
    'f:containers': {
      'k:{"name":"app"}': { ".": {}, "f:env": { ".": {}, 'k:{"name":"LOG_LEVEL"}': { ".": {}, "f:name": {}, "f:value": {} } }, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {}, "f:resources": {}, "f:terminationMessagePath": {} },
      'k:{"name":"proxy"}': { ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {} }
    },
    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}
  }
}

/** What every pod of the Deployment shares but its node: two containers (the app and a proxy sidecar) with probes, env and volumes. */
const SPEC = {
  containers: [
    {
      name: "app",
      image: "registry.example.com/shop/web:1.4.2",
      imagePullPolicy: "IfNotPresent",
      args: ["--port=8080", "--metrics-port=9090", "--log-format=json"],
      env: [
        { name: "LOG_LEVEL", value: "info" },
        { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
        { name: "POD_IP", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "status.podIP" } } }
      ],
      ports: [
        { name: "http", containerPort: 8080, protocol: "TCP" },
        { name: "metrics", containerPort: 9090, protocol: "TCP" }
      ],
      resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "256Mi" } },
      readinessProbe: { httpGet: { path: "/ready", port: 8080, scheme: "HTTP" }, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
      livenessProbe: { httpGet: { path: "/healthz", port: 8080, scheme: "HTTP" }, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3 },
      volumeMounts: [
        { name: "config", mountPath: "/etc/web", readOnly: true },
        { name: "kube-api-access", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true }
      ],
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File"
    },
    {
      name: "proxy",
      image: "registry.example.com/mesh/proxy:2.9.0",
      imagePullPolicy: "IfNotPresent",
      args: ["proxy", "sidecar", "--concurrency=2"],
      resources: { requests: { cpu: "50m", memory: "64Mi" } },
      volumeMounts: [{ name: "kube-api-access", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true }],
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File"
    }
  ],
  volumes: [
    { name: "config", configMap: { name: "web-config", defaultMode: 420 } },
    {
      name: "kube-api-access",
      projected: {
        defaultMode: 420,
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
          { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
          { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } }
        ]
      }
    }
  ],
  restartPolicy: "Always",
  terminationGracePeriodSeconds: 30,
  dnsPolicy: "ClusterFirst",
  serviceAccountName: "default",
  securityContext: {},
  schedulerName: "default-scheduler",
  tolerations: [
    { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
    { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 }
  ],
  priority: 0,
  enableServiceLinks: true,
  preemptionPolicy: "PreemptLowerPriority"
}

/** The four managers' fields the API server records on such a pod. */
const MANAGED_FIELDS = [
  { manager: "kube-controller-manager", operation: "Update", apiVersion: "v1", time: TS, fieldsType: "FieldsV1", fieldsV1: fieldsV1Spec },
  { manager: "kube-scheduler", operation: "Update", apiVersion: "v1", time: TS, fieldsType: "FieldsV1", fieldsV1: { "f:status": { "f:conditions": { ".": {}, 'k:{"type":"PodScheduled"}': { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} } } } }, subresource: "status" },
  { manager: "multus-daemon", operation: "Update", apiVersion: "v1", time: TS, fieldsType: "FieldsV1", fieldsV1: { "f:metadata": { "f:annotations": { "f:k8s.v1.cni.cncf.io/network-status": {} } } }, subresource: "status" },
  {
    manager: "kubelet",
    operation: "Update",
    apiVersion: "v1",
    time: TS,
    fieldsType: "FieldsV1",
    fieldsV1: {
      "f:status": {
        "f:conditions": { 'k:{"type":"ContainersReady"}': { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} }, 'k:{"type":"Initialized"}': { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} }, 'k:{"type":"Ready"}': { ".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {} } },
        "f:containerStatuses": {}, "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": { ".": {}, 'k:{"ip":"x"}': { ".": {}, "f:ip": {} } }, "f:startTime": {}
      }
    },
    subresource: "status"
  }
]

/**
 * A full pod object with Multus' `networks` annotation (e.g. `ns/net-0@net1`; "" names none) and
 * `network-status` (JSON, as Multus writes it after CNI ADD). `forCreate` leaves out what the API
 * server owns (uid, resourceVersion, managedFields, creationTimestamp, status), so the object can
 * be POSTed; the heap benchmark keeps everything, as the informer would receive it.
 */
export const realisticPod = (namespace: string, name: string, i: number, nets: { readonly networks: string; readonly networkStatus: string }, options: { readonly nodeName?: string | undefined; readonly forCreate?: boolean } = {}): KubeObject => {
  const rs = `web-${hex(7, 10)}`
  const labels = { app: "web", tier: "frontend", "pod-template-hash": hex(7, 10), "app.kubernetes.io/part-of": "shop", "app.kubernetes.io/version": "1.4.2" }
  // A pod on the cluster network alone names no networks; Multus still writes its network-status.
  const annotations = {
    ...(nets.networks === "" ? {} : { [NETWORKS_ANNOTATION]: nets.networks }),
    [NETWORK_STATUS_ANNOTATION]: nets.networkStatus,
    "kubectl.kubernetes.io/restartedAt": TS,
    "prometheus.io/scrape": "true",
    "prometheus.io/port": "9090"
  }
  const metadata: Record<string, unknown> = {
    name,
    generateName: `${rs}-`,
    namespace,
    labels,
    annotations,
    ownerReferences: [{ apiVersion: "apps/v1", kind: "ReplicaSet", name: rs, uid: uid(7, 9), controller: true, blockOwnerDeletion: true }]
  }
  const spec = { nodeName: options.nodeName ?? `node-${i % 50}`, ...SPEC }
  if (options.forCreate === true) return { apiVersion: "v1", kind: "Pod", metadata: metadata as KubeObject["metadata"], spec }
  metadata["uid"] = uid(i, 1)
  metadata["resourceVersion"] = String(100_000 + i)
  metadata["creationTimestamp"] = TS
  metadata["managedFields"] = MANAGED_FIELDS
  return { apiVersion: "v1", kind: "Pod", metadata: metadata as KubeObject["metadata"], spec, status: realisticStatus(i) }
}

/** What the kubelet reports for a running pod (written through pods/status on a real server). */
export const realisticStatus = (i: number): Record<string, unknown> => {
  const hostIP = `192.168.${(i % 50) >> 8}.${(i % 50) + 10}`
  const podIP = `10.244.${(i >> 8) & 255}.${i & 255}`
  const condition = (type: string) => ({ type, status: "True", lastProbeTime: null, lastTransitionTime: TS })
  const container = (name: string, image: string, k: number) => ({
    name,
    state: { running: { startedAt: TS } },
    lastState: {},
    ready: true,
    restartCount: 0,
    image,
    imageID: `${image.split(":")[0]}@sha256:${hex(k, 64, 3)}`,
    containerID: `containerd://${hex(i, 64, k)}`,
    started: true,
    volumeMounts: [{ name: "kube-api-access", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true, recursiveReadOnly: "Disabled" }]
  })
  return {
    phase: "Running",
    conditions: ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"].map(condition),
    hostIP,
    hostIPs: [{ ip: hostIP }],
    podIP,
    podIPs: [{ ip: podIP }],
    startTime: TS,
    containerStatuses: [container("app", "registry.example.com/shop/web:1.4.2", 1), container("proxy", "registry.example.com/mesh/proxy:2.9.0", 2)],
    qosClass: "Burstable"
  }
}
