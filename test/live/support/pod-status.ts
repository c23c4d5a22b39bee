/**
 * The pod status a kubelet posts (the node agent's, node-agent.ts): Running and Ready once the
 * sandbox is up, and the terminal phase once its containers ended, on their own or because the pod
 * was deleted.
 */
import type { KubeObject } from "../../../src/services/KubeApi.ts"
import { nowTime } from "./node-status.ts"

const containersOf = (pod: KubeObject) =>
  ((pod["spec"] as { containers?: Array<{ name: string; image?: string }> }).containers ?? []).map((c) => ({ name: c.name, image: c.image ?? "" }))

/** Running, Ready, every container started. */
export const runningStatus = (pod: KubeObject, containerId: string) => {
  const now = nowTime()
  const condition = (type: string) => ({ type, status: "True", lastTransitionTime: now })
  return {
    phase: "Running",
    startTime: now,
    conditions: ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"].map(condition),
    containerStatuses: containersOf(pod).map((c) => ({
      ...c,
      imageID: "",
      containerID: `containerd://${containerId}`,
      ready: true,
      started: true,
      restartCount: 0,
      state: { running: { startedAt: now } }
    }))
  }
}

/** Succeeded (exit code 0) or Failed, every container terminated with that code. */
export const endedStatus = (pod: KubeObject, containerId: string, exitCode: number) => {
  const now = nowTime()
  const reason = exitCode === 0 ? "Completed" : "Error"
  return {
    phase: exitCode === 0 ? "Succeeded" : "Failed",
    conditions: ["Ready", "ContainersReady"].map((type) => ({ type, status: "False", reason: "PodCompleted", lastTransitionTime: now })),
    containerStatuses: containersOf(pod).map((c) => ({
      ...c,
      imageID: "",
      containerID: `containerd://${containerId}`,
      ready: false,
      started: false,
      restartCount: 0,
      state: { running: null, terminated: { exitCode, reason, startedAt: now, finishedAt: now } }
    }))
  }
}

