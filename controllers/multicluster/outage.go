package multicluster

import (
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// DefaultBrokerOutageGrace is how long the broker may fail transiently before the exports
// whose publication it holds back report it (Options.BrokerOutageGrace): longer than a broker
// control-plane restart or upgrade takes, so that one comes and goes without a status write
// or an event on every export that changed meanwhile.
const DefaultBrokerOutageGrace = 2 * time.Minute

// brokerOutage is this member's one view of whether the broker is reachable: the Lease renewer
// and every broker write report to it. A transient failure (no answer, a timeout, 429, 5xx)
// starts an outage, any success ends it. The outage is one fact of the whole member: it is
// logged once by the renewer and shown by the broker_reachable metric, and the exports say
// nothing of it until it has lasted its grace (exportReconciler).
type brokerOutage struct {
	mu    sync.Mutex
	now   func() time.Time
	since time.Time // zero: reachable
}

func newBrokerOutage() *brokerOutage { return &brokerOutage{now: time.Now} }

// observe records the outcome of one broker request.
func (o *brokerOutage) observe(err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil:
		o.since = time.Time{}
	case transient(err) && o.since.IsZero():
		o.since = o.now()
	}
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
