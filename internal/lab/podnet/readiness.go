package podnet

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// startProbes runs the readiness probes of a Pod's containers. kwok marks a Pod Ready the moment
// it runs it, and leaves a running Pod's conditions alone afterwards; so a Pod with probes is
// marked not ready at once, and ready again only once every probed container passes, as a
// kubelet reports it: endpoint readiness then follows a real listener.
func (r *Runtime) startProbes(pod *corev1.Pod, p *runningPod) {
	env := map[string][]string{}
	for _, c := range p.containers {
		env[c.spec.Name] = c.spec.Env
	}
	var probed []*corev1.Container
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; c.ReadinessProbe != nil {
			if _, started := env[c.Name]; started {
				probed = append(probed, c)
			}
		}
	}
	if len(probed) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stopProbes = cancel
	p.readiness = map[string]bool{}
	for _, c := range probed {
		p.readiness[c.Name] = false
	}
	// The first write (not ready) is retried until it lands: while it has not, kwok's Ready
	// stands, and a probe that never passes would never correct it.
	go func() {
		_ = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			err := r.writeReadiness(ctx, pod, p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "local runtime %s: pod %s/%s: writing readiness: %v\n", r.Member, pod.Namespace, pod.Name, err)
			}
			return err == nil, nil
		})
	}()
	for _, c := range probed {
		pr := &prober{probe: c.ReadinessProbe, container: c, netns: p.sandbox.Netns, podIP: p.ip, env: env[c.Name]}
		pr.report = func(ready bool) {
			r.mu.Lock()
			p.readiness[c.Name] = ready
			r.mu.Unlock()
			if err := r.writeReadiness(ctx, pod, p); err != nil && ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "local runtime %s: pod %s/%s: writing readiness: %v\n", r.Member, pod.Namespace, pod.Name, err)
			}
		}
		go pr.run(ctx)
	}
}

// writeReadiness writes the Pod's Ready and ContainersReady conditions and each container's
// ready flag from the probes' last verdicts (containers without a probe are ready).
func (r *Runtime) writeReadiness(ctx context.Context, pod *corev1.Pod, p *runningPod) error {
	// One write at a time per Pod, each reading the verdicts when it starts: the last write to
	// land carries the latest verdicts.
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	r.mu.Lock()
	verdicts := make(map[string]bool, len(p.readiness))
	all := true
	for name, ready := range p.readiness {
		verdicts[name] = ready
		all = all && ready
	}
	r.mu.Unlock()
	pods := r.Client.CoreV1().Pods(pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if current.UID != pod.UID {
			return nil
		}
		changed := false
		for _, t := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			changed = setCondition(&current.Status, t, all) || changed
		}
		for i := range current.Status.ContainerStatuses {
			cs := &current.Status.ContainerStatuses[i]
			if ready, probed := verdicts[cs.Name]; probed && cs.Ready != ready {
				cs.Ready, changed = ready, true
			}
		}
		if !changed {
			return nil
		}
		_, err = pods.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
	if err == nil {
		r.mu.Lock()
		p.wroteReady, p.wrote = all, true
		r.mu.Unlock()
	}
	return err
}

// setCondition sets a Pod condition's status, and its transition time when it changes.
func setCondition(status *corev1.PodStatus, t corev1.PodConditionType, ready bool) bool {
	want := corev1.ConditionFalse
	if ready {
		want = corev1.ConditionTrue
	}
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status == want {
			return false
		}
		c.Status, c.LastTransitionTime = want, metav1.Now()
		return true
	}
	status.Conditions = append(status.Conditions, corev1.PodCondition{Type: t, Status: want, LastTransitionTime: metav1.Now()})
	return true
}
