package multicluster

import (
	"reflect"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/reconnect"
)

func TestBrokerClusterCachesItsNamespaceAndRemembersMappings(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	w := &wiring{opts: Options{BrokerNamespace: "fleetslice-broker"}, log: logr.Discard()}
	var o cluster.Options
	w.brokerClusterOptions(scheme, &reconnect.Gate{Server: "broker"})(&o)
	if reflect.ValueOf(o.MapperProvider).Pointer() != reflect.ValueOf(apiclient.MapperProvider).Pointer() {
		t.Error("the broker cluster maps kinds with controller-runtime's dynamic mapper alone; every request walks every API group's mappings")
	}
	if _, ok := o.Cache.DefaultNamespaces["fleetslice-broker"]; !ok || len(o.Cache.DefaultNamespaces) != 1 {
		t.Errorf("broker cache namespaces %v, want the broker namespace alone", o.Cache.DefaultNamespaces)
	}
	if o.Scheme != scheme || o.Cache.DefaultTransform == nil || o.Cache.NewInformer == nil {
		t.Error("the broker cluster lost its scheme, its managed-fields transform or its reconnect gate")
	}
}
