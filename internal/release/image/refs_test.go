package image

import (
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fleetslice/fleetslice/pkg/version"
)

func TestParsePlatforms(t *testing.T) {
	amd64 := v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 := v1.Platform{OS: "linux", Architecture: "arm64"}
	for _, tc := range []struct {
		in      string
		want    []v1.Platform
		wantErr bool
	}{
		{in: DefaultPlatforms, want: []v1.Platform{amd64, arm64}},
		{in: " linux/arm64 , linux/amd64,", want: []v1.Platform{arm64, amd64}},
		{in: "linux/arm/v7", want: []v1.Platform{{OS: "linux", Architecture: "arm", Variant: "v7"}}},
		{in: "", wantErr: true},
		{in: "amd64", wantErr: true},
		{in: "linux/", wantErr: true},
		{in: "linux/amd64/v2/x", wantErr: true},
		{in: "windows/amd64", wantErr: true},
		{in: "linux/amd64,linux/amd64", wantErr: true},
	} {
		got, err := ParsePlatforms(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParsePlatforms(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParsePlatforms(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestResolveRefs(t *testing.T) {
	release := version.Release
	for _, tc := range []struct {
		name          string
		registry, tag string
		set           Refs
		want          Refs
		wantErr       bool
	}{
		{
			name: "defaults name the release, not latest",
			want: Refs{"ghcr.io/fleetslice/manager:" + release, "ghcr.io/fleetslice/agent:" + release, "ghcr.io/fleetslice/dns:" + release},
		},
		{
			name: "registry and tag", registry: "registry.example/fs/", tag: "v9",
			want: Refs{"registry.example/fs/manager:v9", "registry.example/fs/agent:v9", "registry.example/fs/dns:v9"},
		},
		{
			name: "one reference set, the others derived", registry: "127.0.0.1:5000/x", tag: "t",
			set:  Refs{Agent: "other.example/agent:a1"},
			want: Refs{"127.0.0.1:5000/x/manager:t", "other.example/agent:a1", "127.0.0.1:5000/x/dns:t"},
		},
		{name: "a set reference without a tag", set: Refs{Manager: "registry.example/manager"}, wantErr: true},
		{name: "a digest is not a build's name", set: Refs{DNS: "registry.example/dns@sha256:" + zeros}, wantErr: true},
		{name: "an invalid tag", tag: "v1 beta", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveRefs(tc.registry, tc.tag, tc.set)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"

func TestPin(t *testing.T) {
	d1 := "sha256:" + zeros[:63] + "1"
	pushed := Pushed{
		"registry.example/fs/manager:v1":       d1,
		"index.docker.io/library/agent:v1":     d1,
		"127.0.0.1:5000/fleetslice/dns:v0.1.0": d1,
	}
	for _, tc := range []struct{ ref, want string }{
		{"registry.example/fs/manager:v1", "registry.example/fs/manager:v1@" + d1},
		{"127.0.0.1:5000/fleetslice/dns:v0.1.0", "127.0.0.1:5000/fleetslice/dns:v0.1.0@" + d1},
		// Docker Hub's short form is the same reference as its full form.
		{"agent:v1", "agent:v1@" + d1},
		// Another tag of a pushed repository was not pushed: keep the tag.
		{"registry.example/fs/manager:v2", "registry.example/fs/manager:v2"},
		{"registry.example/other/manager:v1", "registry.example/other/manager:v1"},
		// Already pinned, or not a tag: unchanged.
		{"registry.example/fs/manager:v1@" + d1, "registry.example/fs/manager:v1@" + d1},
		{"registry.example/fs/manager@" + d1, "registry.example/fs/manager@" + d1},
	} {
		if got := pushed.Pin(tc.ref); got != tc.want {
			t.Errorf("Pin(%q) = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

func TestPushedFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), DigestsFile)
	empty, err := ReadPushed(path)
	if err != nil || len(empty) != 0 {
		t.Fatalf("a missing file reads as %v, %v; want an empty record", empty, err)
	}
	want := Pushed{"registry.example/b:v1": "sha256:" + zeros, "registry.example/a:v1": "sha256:" + zeros[:63] + "f"}
	if err := want.Write(path); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPushed(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}
	bad := filepath.Join(t.TempDir(), DigestsFile)
	if err := (Pushed{"registry.example/a:v1": "sha256:short"}).Write(bad); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPushed(bad); err == nil {
		t.Error("a malformed digest was accepted")
	}
}
