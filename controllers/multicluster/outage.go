package multicluster

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// DefaultBrokerOutageGrace is how long the broker may fail transiently before the exports
// whose publication it holds back report it (Options.BrokerOutageGrace): longer than a broker
// control-plane restart or upgrade takes, so that one comes and goes without a status write
// or an event on every export that changed meanwhile.
const DefaultBrokerOutageGrace = 2 * time.Minute

// brokerRefusalGrace is how long an export's publication may be refused (forbidden, invalid,
// not found) while the broker otherwise answers before the export reports it. A refusal that
// persists is a mistake someone must fix (an admission policy, RBAC), reported within this
// time; a broker's kube-apiserver that has just started refuses requests for a moment too,
// while its authorizer and CRDs load (the quick bench saw one status flip and one event per
// changed export right after the broker came back), and that is no news to anyone.
const brokerRefusalGrace = 30 * time.Second

// resumeParkedAfter is the shortest outage whose end queues its parked exports again at once.
// A shorter one (an overloaded broker answering some requests and not others) leaves them to
// their back-off: releasing them on every success would retry them without any.
const resumeParkedAfter = 5 * time.Second

// brokerOutage is this member's one view of whether the broker is reachable: the Lease renewer
// and every broker write report to it. A transient failure (no answer, a timeout, 429, 5xx)
// starts an outage, any success ends it. The outage is one fact of the whole member: it is
// logged once by the renewer and shown by the broker_reachable metric, and the exports say
// nothing of it until it has lasted its grace (exportReconciler).
type brokerOutage struct {
	mu    sync.Mutex
	now   func() time.Time
	since time.Time // zero: reachable
	// refused holds, per export, when its publication was first refused since it last worked.
	refused map[types.NamespacedName]time.Time
	// parked holds the exports whose publication failed transiently during the current outage.
	// Each failure also backs the export off in the workqueue, doubling up to MaxRetryDelay, so
	// after a minute down the changed exports would wait out up to 10 s of back-off after the
	// broker is back (the 3 x 1,000 bench's comeback tail); they are queued on resumed the
	// moment any broker request succeeds again.
	parked  map[types.NamespacedName]bool
	resumed chan event.GenericEvent
}

func newBrokerOutage() *brokerOutage {
	return &brokerOutage{now: time.Now, refused: map[types.NamespacedName]time.Time{},
		parked: map[types.NamespacedName]bool{}, resumed: make(chan event.GenericEvent, 1024)}
}

// resumedExports carries a ServiceExport stub for each export parked in an outage, once the
// broker answers again.
func (o *brokerOutage) resumedExports() <-chan event.GenericEvent { return o.resumed }

// published records the outcome of one export's publication and returns how long its failure
// has lasted as the export should report it: the member-wide outage's duration while one is on
// (a refusal then is the broker starting), else how long its refusals have lasted; zero when it
// worked.
func (o *brokerOutage) published(export types.NamespacedName, err error) time.Duration {
	o.observe(err)
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	switch {
	case err == nil:
		delete(o.refused, export)
		return 0
	case !o.since.IsZero():
		delete(o.refused, export)
		if transient(err) {
			o.parked[export] = true
		}
		return now.Sub(o.since)
	}
	first, ok := o.refused[export]
	if !ok {
		o.refused[export], first = now, now
	}
	return now.Sub(first)
}

// observe records the outcome of one broker request.
func (o *brokerOutage) observe(err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		if !o.since.IsZero() && o.now().Sub(o.since) >= resumeParkedAfter {
			o.resumeParked()
		}
		clear(o.parked)
		o.since = time.Time{}
	case transient(err) && o.since.IsZero():
		o.since = o.now()
	}
}

// resumeParked queues every parked export again; o.mu is held, and observe clears parked
// afterwards. The sends run on their own, so that whoever saw the broker answer (the prober,
// the renewer, a reconcile) never waits for the export controller's queue.
func (o *brokerOutage) resumeParked() {
	if len(o.parked) == 0 {
		return
	}
	keys := slices.Collect(maps.Keys(o.parked))
	go func() {
		for _, k := range keys {
			o.resumed <- event.GenericEvent{Object: &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}}
		}
	}()
}

// lasted is how long the current outage has lasted, zero when the broker is reachable.
func (o *brokerOutage) lasted() time.Duration {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return 0
	}
	return o.now().Sub(o.since)
}

// transient reports whether a broker error is one that retrying fixes by itself: the broker
// (or the way to it) down, slow or overloaded. Refusals that name the request (forbidden,
// invalid, unauthorized, not found) are not: they persist until someone acts.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer from the broker: refused, reset, timed out
	}
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err)
}
