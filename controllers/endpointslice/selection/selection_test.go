package selection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// web is a Service selecting app=web.
func web() *corev1.Service {
	return builders.MakeService("default", "web").Selector("app", "web").Obj()
}

// optedIn is a selector-less Service carrying its selector in the annotation.
func optedIn(selector string) *corev1.Service {
	svc := web()
	svc.Spec.Selector = nil
	svc.Annotations = map[string]string{Annotation: selector}
	return svc
}

func TestOf(t *testing.T) {
	external := web()
	external.Spec.Type = corev1.ServiceTypeExternalName
	both := web()
	both.Annotations = map[string]string{Annotation: "app=other"}
	bare := web()
	bare.Spec.Selector = nil
	for _, tc := range []struct {
		name    string
		svc     *corev1.Service
		scope   Scope
		selects string // the selector's String(), "" for none
		ignored bool
		adopt   bool
		basis   Basis
		err     bool
	}{
		{"spec selector, all", web(), ScopeAll, "app=web", false, false, SpecSelector, false},
		{"spec selector, opted-in: kube-controller-manager's", web(), ScopeOptedIn, "", false, false, LeftToUpstream, false},
		{"annotation, all", optedIn("app=web,tier=front"), ScopeAll, "app=web,tier=front", false, true, Annotated, false},
		{"annotation, opted-in", optedIn("app=web"), ScopeOptedIn, "app=web", false, true, Annotated, false},
		{"annotation with spaces", optedIn(" app = web "), ScopeOptedIn, "app=web", false, true, Annotated, false},
		{"both, all: spec wins", both, ScopeAll, "app=web", true, false, SpecSelector, false},
		{"both, opted-in: neither", both, ScopeOptedIn, "", true, false, LeftToUpstream, false},
		{"neither", bare, ScopeAll, "", false, false, NoSelector, false},
		{"ExternalName", external, ScopeAll, "", false, false, ExternalName, false},
		{"set-based selector refused", optedIn("app in (web)"), ScopeOptedIn, "", false, false, Annotated, true},
		{"empty annotation refused", optedIn(""), ScopeOptedIn, "", false, false, Annotated, true},
		{"invalid value refused", optedIn("app=we b"), ScopeOptedIn, "", false, false, Annotated, true},
		{"invalid key refused", optedIn("-app=web"), ScopeOptedIn, "", false, false, Annotated, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Of(tc.svc, tc.scope)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil && !strings.Contains(err.Error(), Annotation) {
				t.Errorf("error %q does not name the annotation", err)
			}
			got := ""
			if s.Selector != nil {
				got = s.Selector.String()
			}
			if got != tc.selects {
				t.Errorf("selector %q, want %q", got, tc.selects)
			}
			if (s.Ignored != "") != tc.ignored {
				t.Errorf("ignored = %q, want ignored %v", s.Ignored, tc.ignored)
			}
			if s.AdoptUpstream != tc.adopt || s.Basis != tc.basis {
				t.Errorf("adopt %v basis %d, want %v and %d", s.AdoptUpstream, s.Basis, tc.adopt, tc.basis)
			}
		})
	}
}

func TestScopeSet(t *testing.T) {
	var s Scope
	if err := s.Set("opted-in"); err != nil || s != ScopeOptedIn || s.String() != "opted-in" {
		t.Errorf("Set(opted-in) = %v, %q", err, s)
	}
	if err := s.Set("none"); err == nil || s != ScopeOptedIn {
		t.Errorf("Set(none) = %v and left %q; want an error and the value kept", err, s)
	}
}

func FuzzOfAnnotation(f *testing.F) {
	for _, seed := range []string{"app=web", "a=b,c=d", "", "app in (x)", "=", "a==b", "a!=b", "a=b,"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		s, err := Of(optedIn(value), ScopeOptedIn)
		if err != nil {
			if s.Selector != nil || s.AdoptUpstream {
				t.Fatalf("%q: a refused annotation selected %q", value, s.Selector)
			}
			return
		}
		// Whatever is accepted is a non-empty equality selector that round-trips.
		if s.Selector == nil || s.Selector.Empty() {
			t.Fatalf("%q accepted as an empty selector", value)
		}
		again, err := labels.ConvertSelectorToLabelsMap(s.Selector.String())
		if err != nil || !s.Selector.Matches(again) {
			t.Fatalf("%q: selector %q does not match its own labels: %v", value, s.Selector, err)
		}
	})
}
