// Command controlloop runs whereabouts' pod controller (package pkg/controlloop of the release
// pinned in go.mod) against any API server named by a kubeconfig, for the benchmarks in bench/.
//
// The release's own ip-control-loop binary builds its clients from rest.InClusterConfig, so it
// only runs inside a cluster, and it also starts the cron reconciler, which needs a mounted
// ConfigMap. This program wires the same pieces the same way (informer factories for pods on
// this node, NADs and IPPools, the whereabouts clientset, an event broadcaster writing Events
// through the core clientset) from a kubeconfig, and runs only the pod controller.
//
// Environment:
//
//	KUBECONFIG             the kubeconfig (required)
//	NODENAME               the node whose pods it watches; the Node object must exist (upstream checks)
//	WHEREABOUTS_NAMESPACE  where pools and leases live (read by upstream; default kube-system)
//	API_QPS, API_BURST     client-side limit of each clientset; unset: client-go's defaults, which
//	                       is what the released binary runs with (it sets neither)
//	LOG_LEVEL              upstream's log level; default debug, which the released binary always
//	                       runs at (its -log-level flag is declared but never parsed)
//	METRICS_ADDR           host:port for GET /metrics (requests counted by verb, resource and code,
//	                       as the transport saw them) and GET /readyz (200 once the caches synced)
//
// `controlloop -version` prints the whereabouts module version linked in and exits.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	nadinformers "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/informers/externalversions"

	"github.com/k8snetworkplumbingwg/whereabouts/pkg/controlloop"
	wbclient "github.com/k8snetworkplumbingwg/whereabouts/pkg/generated/clientset/versioned"
	wbinformers "github.com/k8snetworkplumbingwg/whereabouts/pkg/generated/informers/externalversions"
	"github.com/k8snetworkplumbingwg/whereabouts/pkg/logging"
)

const whereaboutsModule = "github.com/k8snetworkplumbingwg/whereabouts"

// The event source the released binary uses, so Events look the same.
const controllerName = "pod-ip-controlloop"

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-version" || os.Args[1] == "--version") {
		fmt.Println(moduleVersion())
		return
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "controlloop: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	level := os.Getenv("LOG_LEVEL")
	if level == "" {
		level = "debug"
	}
	logging.SetLogLevel(level)
	logging.SetLogStderr(true)

	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		return fmt.Errorf("KUBECONFIG is not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	if err := applyLimits(cfg); err != nil {
		return err
	}
	counter := newRequestCounter()
	cfg.Wrap(counter.wrap)

	var ready atomic.Bool
	if addr := os.Getenv("METRICS_ADDR"); addr != "" {
		if err := serve(addr, counter, &ready); err != nil {
			return err
		}
	}

	k8s, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	nads, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	wb, err := wbclient.NewForConfig(cfg)
	if err != nil {
		return err
	}

	broadcaster := record.NewBroadcaster()
	broadcaster.StartLogging(logging.Verbosef)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k8s.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: controllerName})

	const noResync = 0
	poolFactory := wbinformers.NewSharedInformerFactory(wb, noResync)
	nadFactory := nadinformers.NewSharedInformerFactory(nads, noResync)
	podFactory, err := controlloop.PodInformerFactory(k8s)
	if err != nil {
		return err
	}
	controller := controlloop.NewPodController(k8s, wb, podFactory, poolFactory, nadFactory, broadcaster, recorder)

	stop := make(chan struct{})
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)

	podFactory.Start(stop)
	nadFactory.Start(stop)
	poolFactory.Start(stop)
	// Start waits for the three caches, then starts the single worker in the background.
	controller.Start(stop)
	ready.Store(true)
	logging.Verbosef("controlloop: caches synced, worker running")

	<-signals
	close(stop)
	controller.Shutdown()
	broadcaster.Shutdown()
	return nil
}

// applyLimits sets QPS and burst from API_QPS/API_BURST when given; otherwise client-go's defaults apply.
func applyLimits(cfg *rest.Config) error {
	for _, v := range []struct {
		name string
		set  func(float64)
	}{
		{"API_QPS", func(x float64) { cfg.QPS = float32(x) }},
		{"API_BURST", func(x float64) { cfg.Burst = int(x) }},
	} {
		text := os.Getenv(v.name)
		if text == "" {
			continue
		}
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return fmt.Errorf("%s=%q: %w", v.name, text, err)
		}
		v.set(x)
	}
	return nil
}

func moduleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == whereaboutsModule {
			if dep.Replace != nil {
				return dep.Path + " " + dep.Version + " => " + dep.Replace.Path + " " + dep.Replace.Version
			}
			return dep.Path + " " + dep.Version
		}
	}
	return "unknown"
}

func serve(addr string, counter *requestCounter, ready *atomic.Bool) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("METRICS_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		counter.write(w)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	go func() { _ = http.Serve(listener, mux) }()
	return nil
}

// requestCounter counts what goes over the wire, after client-go's rate limiters, by the same
// labels the controller's api_requests_total uses (verb, resource, code).
type requestCounter struct {
	mu     sync.Mutex
	counts map[[3]string]uint64
}

func newRequestCounter() *requestCounter {
	return &requestCounter{counts: map[[3]string]uint64{}}
}

func (c *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		verb, resource := classify(req)
		res, err := next.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(res.StatusCode)
		}
		c.mu.Lock()
		c.counts[[3]string{verb, resource, code}]++
		c.mu.Unlock()
		return res, err
	})
}

func (c *requestCounter) write(w http.ResponseWriter) {
	c.mu.Lock()
	keys := make([][3]string, 0, len(c.counts))
	for k := range c.counts {
		keys = append(keys, k)
	}
	snapshot := make(map[[3]string]uint64, len(c.counts))
	for k, v := range c.counts {
		snapshot[k] = v
	}
	c.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], " ") < strings.Join(keys[j][:], " ") })
	fmt.Fprintln(w, "# TYPE controlloop_api_requests_total counter")
	for _, k := range keys {
		fmt.Fprintf(w, "controlloop_api_requests_total{verb=%q,resource=%q,code=%q} %d\n", k[0], k[1], k[2], snapshot[k])
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// classify maps a request to (verb, resource) the way the API server's request info does:
// /api/v1[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]] and the same under /apis/<group>/<version>.
func classify(req *http.Request) (string, string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(req.Method), ""
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) == 0 {
		return strings.ToLower(req.Method), ""
	}
	resource, named := parts[0], len(parts) >= 2
	switch req.Method {
	case http.MethodGet:
		if req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1" {
			return "watch", resource
		}
		if named {
			return "get", resource
		}
		return "list", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "replace", resource
	case http.MethodPatch:
		return "patch", resource
	case http.MethodDelete:
		if named {
			return "delete", resource
		}
		return "deletecollection", resource
	}
	return strings.ToLower(req.Method), resource
}
