package clusterid

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func property(value string) *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(GroupVersionKind)
	p.SetName(PropertyName)
	_ = unstructured.SetNestedField(p.Object, value, "spec", "value")
	return p
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name     string
		property string
		fallback string
		want     string
		wantErr  string
	}{
		{name: "property only", property: "east", want: "east"},
		{name: "fallback only", fallback: "west", want: "west"},
		{name: "both agree", property: "east", fallback: "east", want: "east"},
		{name: "both disagree", property: "east", fallback: "west", wantErr: "differs"},
		{name: "neither", wantErr: "no cluster id"},
		{name: "invalid", fallback: "East_1", wantErr: "DNS-1123"},
		{name: "too long", fallback: strings.Repeat("a", MaxLength+1), wantErr: "longer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			builder := fake.NewClientBuilder().WithScheme(runtime.NewScheme())
			if tc.property != "" {
				builder = builder.WithObjects(property(tc.property))
			}
			got, err := Resolve(context.Background(), builder.Build(), tc.fallback)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Resolve = %q, %v; want error with %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestEnsure(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).Build()
	ctx := context.Background()
	if err := Ensure(ctx, c, "east"); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, c, "east"); err != nil {
		t.Fatalf("ensuring twice: %v", err)
	}
	if err := Ensure(ctx, c, "west"); err == nil {
		t.Fatal("a different id must be refused")
	}
	if got, err := Read(ctx, c); err != nil || got != "east" {
		t.Fatalf("Read = %q, %v", got, err)
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"east", "", "a.b", "-a", strings.Repeat("x", 70), "Ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if Validate(id) != nil {
			return
		}
		if len("member-"+id) > 63 || strings.ContainsAny(id, "._/ ") || strings.ToLower(id) != id {
			t.Fatalf("%q validated but cannot be used in names and labels", id)
		}
	})
}
