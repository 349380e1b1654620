package reconnect

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// readyzQPS and readyzBurst give the probe a limiter of its own: it asks at most every
// DefaultProbeInterval, and must not queue behind the bulk writes of the config it copies.
const (
	readyzQPS   = 5
	readyzBurst = 5
)

// Readyz is a probe of the API server cfg points at: its /readyz, which the default RBAC lets
// every user read. A kube-apiserver that listens but still starts answers it with 500 until its
// storage and post-start hooks are ready; that counts as no answer yet (503), so lists and
// watches are not let go into a server that would still fail them and send their reflectors
// into back-off. A refusal (403 where /readyz is not public) counts as an answer: lists go on and
// find out for themselves.
func Readyz(cfg *rest.Config) (func(context.Context) error, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.RateLimiter, cfg.QPS, cfg.Burst = nil, readyzQPS, readyzBurst
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("readyz probe: %w", err)
	}
	rc := dc.RESTClient()
	return func(ctx context.Context) error {
		err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
		if apierrors.IsInternalError(err) {
			return apierrors.NewServiceUnavailable(fmt.Sprintf("not ready: %v", err))
		}
		return err
	}, nil
}
