package broker

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// probeService names the Service the dry-run probes pretend to publish.
const probeService = "fleetslice-broker-probe"

// Verify proves, with dry-run writes as member cluster (memberConfig must authenticate as its
// broker identity), that the broker is usable and isolating: the member may write an object
// labelled with its own cluster id, and is refused one labelled with another's. The admission
// policies take effect a moment after they are created, so the refusal is awaited. Nothing is
// stored.
func Verify(ctx context.Context, memberConfig *rest.Config, namespace, cluster string, timeout time.Duration) error {
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(memberConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	probe := func(owner string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace,
				Name:      names.RecordName(owner, namespace, probeService),
				Labels:    names.RecordLabels(owner, namespace, probeService),
			},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
	}
	if err := c.Create(ctx, probe(cluster), client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("member %s cannot write its own objects in the broker namespace %s: %w", cluster, namespace, err)
	}
	other := "not-" + cluster
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = c.Create(ctx, probe(other), client.DryRunAll)
		return apierrors.IsForbidden(last) || apierrors.IsInvalid(last), nil
	})
	if err != nil {
		return fmt.Errorf("the broker does not refuse member %s a write labelled as cluster %s (last answer: %v); is the ValidatingAdmissionPolicy admission plugin enabled?", cluster, other, last)
	}
	return nil
}
