package podnet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
)

// maxStopGrace caps a Pod's termination grace period: kwok deletes a terminating Pod at once,
// so the processes of a Pod that is gone from the API should not linger for long.
const maxStopGrace = 5 * time.Second

// Runtime runs the Pods of one member whose Nodes are in the network: it plays the part of the
// container runtime beside kwok, which plays the kubelet's API part (status, IPs).
type Runtime struct {
	Member  string
	Network *Network
	Client  kubernetes.Interface
	// DNS is the member's DNS as Pods reach it; nil leaves Pods with the host's resolver.
	DNS *DNS
	// LogDir holds one file per container: <namespace>_<pod>_<container>.log.
	LogDir string

	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[types.NamespacedName]
	pods     cache.Indexer

	mu      sync.Mutex
	running map[types.NamespacedName]*runningPod
}

type runningPod struct {
	uid        types.UID
	ip         string
	sandbox    *Sandbox
	containers []*container
	// stopProbes ends the readiness probes; readiness holds each probed container's last verdict.
	stopProbes context.CancelFunc
	readiness  map[string]bool
	writeMu    sync.Mutex
	// wroteReady is the readiness the Pod's status held after the last write that landed (or
	// found nothing to change), wrote whether one did: kwok's own Ready stands until then.
	wroteReady, wrote bool
}

// Start watches the member's Pods and runs those on its Nodes until ctx ends; Stop then stops
// them. It returns once the Pods are listed.
func (r *Runtime) Start(ctx context.Context) error {
	if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
		return err
	}
	r.running = map[types.NamespacedName]*runningPod{}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.Client.CoreV1().Events("")})
	r.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "fleetslice-local-runtime"})
	r.queue = workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())

	factory := informers.NewSharedInformerFactory(r.Client, 0)
	informer := factory.Core().V1().Pods().Informer()
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			r.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		} else if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			if pod, ok := tomb.Obj.(*corev1.Pod); ok {
				r.queue.Add(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	r.pods = informer.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return fmt.Errorf("%s: the Pod list did not arrive", r.Member)
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
		broadcaster.Shutdown()
	}()
	// Pod setup is a handful of `ip` calls: a few workers keep a rollout's Pods from queueing.
	for range 4 {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for r.processNext() {
			}
		}, time.Second)
	}
	return nil
}

func (r *Runtime) processNext() bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(key); err != nil {
		r.queue.AddRateLimited(key)
		fmt.Fprintf(os.Stderr, "local runtime %s: pod %s: %v\n", r.Member, key, err)
		return true
	}
	r.queue.Forget(key)
	return true
}

// sync makes what runs for one Pod match the Pod: started once kwok gave it an IP and marked it
// running, stopped once it is terminating or gone, restarted if it was replaced.
func (r *Runtime) sync(key types.NamespacedName) error {
	obj, exists, err := r.pods.GetByKey(key.String())
	if err != nil {
		return err
	}
	var pod *corev1.Pod
	if exists {
		pod = obj.(*corev1.Pod)
	}
	r.mu.Lock()
	current := r.running[key]
	r.mu.Unlock()
	if current != nil && (pod == nil || !r.shouldRun(pod) || pod.UID != current.uid || pod.Status.PodIP != current.ip) {
		grace := maxStopGrace
		if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = min(grace, time.Duration(*pod.Spec.TerminationGracePeriodSeconds)*time.Second)
		}
		if err := r.stopPod(key, current, grace); err != nil {
			return err
		}
		current = nil
	}
	if current != nil || pod == nil || !r.shouldRun(pod) {
		return nil
	}
	return r.startPod(key, pod)
}

// shouldRun: kwok has made the Pod running with an IP on a Node of this network.
func (r *Runtime) shouldRun(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" &&
		r.Network.Node(r.Member, pod.Spec.NodeName) != nil
}

func (r *Runtime) startPod(key types.NamespacedName, pod *corev1.Pod) error {
	node := r.Network.Node(r.Member, pod.Spec.NodeName)
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return fmt.Errorf("pod IP %q: %w", pod.Status.PodIP, err)
	}
	var dns *DNS
	if r.DNS != nil {
		d := *r.DNS
		d.Namespace = pod.Namespace
		dns = &d
	}
	var sandbox *Sandbox
	if pod.Spec.HostNetwork {
		// Its processes share the Node's namespace, as on a real node.
		sandbox = &Sandbox{Netns: node.Netns, IP: node.IP, node: node, hostNetwork: true}
	} else if sandbox, err = r.Network.AddPod(node, string(pod.UID), ip, dns); err != nil {
		return err
	}
	p := &runningPod{uid: pod.UID, ip: pod.Status.PodIP, sandbox: sandbox}
	hostPath := os.Getenv("PATH")
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		spec := specFor(pod, c, hostPath)
		for _, problem := range spec.Problems {
			r.recorder.Eventf(pod, corev1.EventTypeWarning, "Unsupported", "container %s: %s", c.Name, problem)
		}
		if reason, msg := unrunnable(spec); reason != "" {
			r.recorder.Event(pod, corev1.EventTypeWarning, reason, msg)
			continue
		}
		ctr := &container{
			spec: spec, netns: sandbox.Netns, policy: pod.Spec.RestartPolicy,
			logPath: r.LogPath(pod.Namespace, pod.Name, c.Name),
		}
		ctr.exited = r.exitReporter(pod, c.Name)
		if err := ctr.start(); err != nil {
			r.recorder.Eventf(pod, corev1.EventTypeWarning, "Failed", "container %s: %v", c.Name, err)
			continue
		}
		r.recorder.Eventf(pod, corev1.EventTypeNormal, "Started", "started container %s on the host in the Pod's network namespace", c.Name)
		p.containers = append(p.containers, ctr)
	}
	r.mu.Lock()
	r.running[key] = p
	r.mu.Unlock()
	r.startProbes(pod, p)
	return nil
}

// unrunnable says why a container cannot run on the host, as an event reason and message.
func unrunnable(spec containerSpec) (reason, msg string) {
	if len(spec.Argv) == 0 {
		return "Failed", fmt.Sprintf("container %s has no command: the local ClusterSet runs a container's command and args as host programs, without its image", spec.Name)
	}
	bin := spec.Argv[0]
	if filepath.IsAbs(bin) {
		if _, err := os.Stat(bin); err != nil {
			return "Failed", fmt.Sprintf("container %s: %s is not on this host (the local ClusterSet runs host programs, not images)", spec.Name, bin)
		}
		return "", ""
	}
	// The container's PATH is the host's (specFor), so the host's lookup is the container's.
	if _, err := exec.LookPath(bin); err != nil {
		return "Failed", fmt.Sprintf("container %s: %q is not installed on this host (the local ClusterSet runs host programs, not images)", spec.Name, bin)
	}
	return "", ""
}

// exitReporter turns a container's failures into events: an exit with a non-zero code, and
// whether it restarts.
func (r *Runtime) exitReporter(pod *corev1.Pod, name string) func(int, bool) {
	ref := pod.DeepCopy()
	return func(code int, restarting bool) {
		if code == 0 && !restarting {
			return
		}
		action := "not restarted (restartPolicy " + string(ref.Spec.RestartPolicy) + ")"
		if restarting {
			action = "restarting with back-off"
		}
		r.recorder.Eventf(ref, corev1.EventTypeWarning, "BackOff", "container %s exited with code %d; %s", name, code, action)
	}
}

func (r *Runtime) stopPod(key types.NamespacedName, p *runningPod, grace time.Duration) error {
	if p.stopProbes != nil {
		p.stopProbes()
	}
	var wg sync.WaitGroup
	for _, c := range p.containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(grace)
		}()
	}
	wg.Wait()
	r.mu.Lock()
	delete(r.running, key)
	r.mu.Unlock()
	return p.sandbox.Delete()
}

// Stop stops every Pod's processes and removes their namespaces.
func (r *Runtime) Stop() error {
	r.mu.Lock()
	all := make(map[types.NamespacedName]*runningPod, len(r.running))
	for k, p := range r.running {
		all[k] = p
	}
	r.mu.Unlock()
	var errs []error
	for k, p := range all {
		if err := r.stopPod(k, p, time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stopping %s's pods: %v", r.Member, errs)
	}
	return nil
}

// execTarget finds a running Pod's namespace and the environment of its container (the first
// when container is empty), as `kubectl exec` runs commands with it.
func (r *Runtime) execTarget(namespace, name, container string) (*Sandbox, []string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.running[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, nil, false
	}
	for _, c := range p.containers {
		if container == "" || c.spec.Name == container {
			return p.sandbox, c.spec.Env, true
		}
	}
	return nil, nil, false
}

// LogPath is where a container's output goes.
func (r *Runtime) LogPath(namespace, pod, container string) string {
	return filepath.Join(r.LogDir, namespace+"_"+pod+"_"+container+".log")
}

// ProbedReady reports whether every readiness probe of a running Pod passed and the Pod's status
// says so by this runtime's own write. A Pod's Ready condition alone cannot tell: kwok marks a
// Pod Ready when it runs it, before the first probe, and the runtime writes it not ready then.
func (r *Runtime) ProbedReady(namespace, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.running[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok || p.readiness == nil || !p.wrote || !p.wroteReady {
		return false
	}
	for _, ready := range p.readiness {
		if !ready {
			return false
		}
	}
	return true
}

// Sandbox returns the namespace a running Pod's processes run in.
func (r *Runtime) Sandbox(namespace, name string) (*Sandbox, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.running[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, false
	}
	return p.sandbox, true
}
