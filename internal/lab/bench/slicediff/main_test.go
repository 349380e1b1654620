package slicediff

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// fleetslice's reconciler logs through controller-runtime's root logger, which complains
	// when nobody set it.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
