package reconnect

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/rest"
)

func TestReadyzCountsAStartingServerAsNoAnswerYet(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		unreachable bool
	}{
		{"ready", http.StatusOK, false},
		{"starting", http.StatusInternalServerError, true},
		{"refusing readyz", http.StatusForbidden, false},
		{"shutting down", http.StatusServiceUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					t.Errorf("probed %s", r.URL.Path)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("[-]poststarthook/example failed: not finished\nreadyz check failed"))
			}))
			defer srv.Close()
			probe, err := Readyz(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if got := Unreachable(probe(context.Background())); got != tc.unreachable {
				t.Errorf("unreachable = %v, want %v", got, tc.unreachable)
			}
		})
	}
	t.Run("gone", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		probe, err := Readyz(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if err := probe(context.Background()); !Unreachable(err) {
			t.Errorf("a closed server: %v counts as an answer", err)
		}
	})
}
